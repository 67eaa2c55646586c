"""`training-job-exporter simulate`: the fake provider APIs on their own.

`--aihc-jobs N` swaps the lively AIHC world for a fixed one of exactly N running jobs (in
the demo pool, queue `default`), so a benchmark can drive a known load from another process.
On SIGTERM/SIGINT it prints how many requests it served, for the benchmark to cross-check the
exporter's own count.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Sequence

from exporter.config import parse_listen_address
from exporter.simulator import Faults, Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, AihcWorld
from exporter.simulator.alaya import DEMO_ACCESS_KEY_ID as ALAYA_ACCESS_KEY_ID
from exporter.simulator.alaya import DEMO_API_KEY
from exporter.simulator.alaya import DEMO_SECRET_ACCESS_KEY as ALAYA_SECRET_ACCESS_KEY


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="training-job-exporter simulate",
        description="Serve simulated Baidu AIHC and Alaya NeW APIs (demo credentials).",
    )
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    p.add_argument("--error-rate", type=float, default=0.0, help="share of replies that are 500")
    p.add_argument(
        "--rate-limit", type=float, default=0.0, help="requests per second before 429 (0: none)"
    )
    p.add_argument(
        "--aihc-jobs",
        type=int,
        default=0,
        metavar="N",
        help=f"serve exactly N running AIHC jobs in {DEMO_RESOURCE_POOL} (0: the lively world)",
    )
    p.add_argument("--aihc-pods", type=int, default=2, metavar="N", help="pods per fixed job")
    return p


def main(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    try:
        host, port = parse_listen_address(args.listen)
    except ValueError as exc:
        print(f"--listen: {exc}")
        return 2
    faults = Faults(
        latency=args.latency,
        error_rates={500: args.error_rate} if args.error_rate else {},
        requests_per_second=args.rate_limit,
    )
    aihc = None
    if args.aihc_jobs > 0:
        aihc = AihcWorld.fixed(
            args.seed,
            pools={DEMO_RESOURCE_POOL: ["default"]},
            jobs=args.aihc_jobs,
            pods_per_job=args.aihc_pods,
        )
    simulator = Simulator(seed=args.seed, aihc=aihc, faults=faults)
    return asyncio.run(_serve(simulator, host, port))


async def _serve(simulator: Simulator, host: str, port: int) -> int:
    async with running(simulator, host, port) as served:
        assert simulator.alaya is not None
        print(f"simulator listening on {served.url}", flush=True)
        print(f"  AIHC: access key id {DEMO_ACCESS_KEY_ID}, resource pool {DEMO_RESOURCE_POOL}")
        print(f"  Alaya: api key {DEMO_API_KEY}, jobs {sorted(simulator.alaya.jobs)}")
        print(
            f"  Alaya job list: access key id {ALAYA_ACCESS_KEY_ID}, "
            f"secret access key {ALAYA_SECRET_ACCESS_KEY}",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    print(f"simulator served {simulator.log.served} requests", flush=True)
    return 0
