"""`training-job-exporter simulate`: the fake provider APIs on their own.

`--aihc-jobs N` swaps the lively AIHC world for a fixed one of exactly N running jobs (in
the demo pool, queue `default`), so a benchmark can drive a known load from another process.
`--aihc-spelling sdk` answers with the field names of Baidu's generated SDK instead of the
documentation's (see `exporter.simulator.aihc`).
On SIGTERM/SIGINT it prints how many requests it served, for the benchmark to cross-check the
exporter's own count.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import time
from collections.abc import Sequence
from pathlib import Path

from exporter.config import parse_listen_address
from exporter.simulator import Faults, RequestLog, Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, AihcWorld
from exporter.simulator.alaya import DEMO_ACCESS_KEY_ID as ALAYA_ACCESS_KEY_ID
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld
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
    p.add_argument(
        "--aihc-spelling",
        choices=("docs", "sdk"),
        default="docs",
        help="field names of AIHC job items and pods: the documentation's or Baidu's SDK's",
    )
    p.add_argument(
        "--alaya-jobs", type=int, default=0, metavar="N", help="Alaya jobs (0: the demo's)"
    )
    p.add_argument("--alaya-pods", type=int, default=3, metavar="N", help="pods per Alaya job")
    p.add_argument(
        "--request-log",
        metavar="PATH",
        help="at exit, write every request as a line: unix time, endpoint, status, job, item",
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
    aihc = None
    if args.aihc_jobs > 0:
        aihc = AihcWorld.fixed(
            args.seed,
            pools={DEMO_RESOURCE_POOL: ["default"]},
            jobs=args.aihc_jobs,
            pods_per_job=args.aihc_pods,
        )
    alaya = None
    if args.alaya_jobs > 0:
        alaya = AlayaWorld(args.seed, job_count=args.alaya_jobs, pods_per_job=args.alaya_pods)
    keep = 5_000_000 if args.request_log else 200_000
    if args.request_log:
        # The log grows all run long; the cyclic collector's walks over it (tens of ms each)
        # would bunch the requests it timestamps. Nothing here makes cycles worth collecting.
        gc.disable()
    simulator = Simulator(
        seed=args.seed, aihc=aihc, alaya=alaya, faults=faults, log=RequestLog(keep=keep)
    )
    assert simulator.aihc is not None
    simulator.aihc.spelling = args.aihc_spelling
    code = asyncio.run(_serve(simulator, host, port))
    if args.request_log:
        write_request_log(simulator.log, Path(args.request_log))
    return code


def write_request_log(log: RequestLog, path: Path) -> None:
    # LoggedRequest.at is monotonic: shift it to unix time, as the exporter's figures are.
    shift = time.time() - time.monotonic()
    with path.open("w", encoding="utf-8") as out:
        for e in log.entries:
            out.write(
                f"{e.at + shift:.3f}\t{e.endpoint}\t{e.status}\t{e.subject[0]}\t{e.subject[1]}\n"
            )


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
