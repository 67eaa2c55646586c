"""`training-job-exporter simulate`: the fake provider APIs on their own."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Sequence

from exporter.config import parse_listen_address
from exporter.simulator import Faults, Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL
from exporter.simulator.alaya import DEMO_API_KEY


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
    simulator = Simulator(seed=args.seed, faults=faults)
    return asyncio.run(_serve(simulator, host, port))


async def _serve(simulator: Simulator, host: str, port: int) -> int:
    async with running(simulator, host, port) as served:
        assert simulator.alaya is not None
        print(f"simulator listening on {served.url}", flush=True)
        print(f"  AIHC: access key id {DEMO_ACCESS_KEY_ID}, resource pool {DEMO_RESOURCE_POOL}")
        print(f"  Alaya: api key {DEMO_API_KEY}, jobs {sorted(simulator.alaya.jobs)}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    return 0
