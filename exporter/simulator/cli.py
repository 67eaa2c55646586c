"""`training-job-exporter simulate`: the fake provider APIs on their own.

Each provider's fake adds its own options (`exporter.simulator.services`): `--aihc-jobs N`
swaps the lively AIHC world for a fixed one of exactly N running jobs (in the demo pool, queue
`default`), so a benchmark can drive a known load from another process; `--aihc-spelling sdk`
answers with the field names of Baidu's generated SDK instead of the documentation's.
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
from contextlib import AsyncExitStack
from pathlib import Path

from exporter.address import parse_listen_address
from exporter.simulator import Faults, RequestLog, Simulator, running
from exporter.simulator.services import simulated

# Requests remembered without --request-log: only their count is printed, and a simulator that
# serves for days must not grow with what it served.
REQUESTS_KEPT = 1000


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="training-job-exporter simulate",
        description="Serve the simulated provider APIs (demo credentials).",
    )
    p.add_argument("--listen", default="127.0.0.1:8080", metavar="HOST:PORT")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    p.add_argument("--error-rate", type=float, default=0.0, help="share of replies that are 500")
    p.add_argument(
        "--rate-limit", type=float, default=0.0, help="requests per second before 429 (0: none)"
    )
    for service in simulated().values():
        service.add_arguments(p)
    p.add_argument(
        "--control",
        metavar="HOST:PORT",
        help="serve the control port too (exporter.simulator.chaos): faults, keys, figures",
    )
    p.add_argument(
        "--request-log",
        metavar="PATH",
        help="at exit, write every request as a line: unix time, endpoint, status, job, item",
    )
    return p


def main(argv: Sequence[str]) -> int:
    args = parser().parse_args(list(argv))
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
    worlds = {name: service.world(args.seed, args) for name, service in simulated().items()}
    keep = 5_000_000 if args.request_log else REQUESTS_KEPT
    if args.request_log:
        # The log grows all run long; the cyclic collector's walks over it (tens of ms each)
        # would bunch the requests it timestamps. Nothing here makes cycles worth collecting.
        gc.disable()
    simulator = Simulator(seed=args.seed, faults=faults, log=RequestLog(keep=keep), **worlds)
    control = parse_listen_address(args.control) if args.control else None
    code = asyncio.run(_serve(simulator, host, port, control))
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


async def _serve(
    simulator: Simulator, host: str, port: int, control: tuple[str, int] | None = None
) -> int:
    async with AsyncExitStack() as stack:
        served = await stack.enter_async_context(running(simulator, host, port))
        print(f"simulator listening on {served.url}")
        if control is not None:
            from exporter.simulator.chaos import controlled

            url = await stack.enter_async_context(controlled(simulator, *control))
            print(f"control listening on {url}")
        for name, service in simulated().items():
            for line in service.greeting(simulator.worlds[name]):
                print(f"  {line}")
        print(end="", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    print(f"simulator served {simulator.log.served} requests", flush=True)
    return 0
