"""The provider's request path against the bare client, in one process, in a minute.

`bench.scale` and `bench.polling` measure the whole exporter against `bench.transport_floor`;
their CPU per request also holds the runner, the queue, the merges and the renders, and a run
takes minutes on a machine whose speed moves between them. This one measures only what a
DescribeJobMetrics call costs through `AihcProvider.read` (the client, its signature, the
gate, the accounting, the parse and the job's series) against the same calls signed ahead and
sent by one bare `aiohttp.ClientSession`, each body read whole and thrown away. Both run in
this process against the simulator (its own process), with 8 workers, each paced by its own
budget at `--rate` (ours by the gate, the bare client by `aiolimiter`), in alternating rounds,
so a machine slowing down in the middle slows both alike. It prints process CPU per request
of each round and their medians' ratio.

    python -m bench.request_path [--jobs 200] [--requests 1200] [--rounds 3] [--rate 160]

To compare two commits, run it from a worktree of each (it measures the code it is run from).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from bench import transport_floor
from bench.simulator import start_simulator
from bench.transport_floor import CONNECTIONS, demo_target
from exporter.providers.aihc.provider import AihcProvider
from exporter.providers.base import Listing, PollContext, ReadContext
from exporter.selfmetrics import SelfMetrics
from exporter.targets import tier_plan

# The fast tier's two types, as steady polling reads them most.
TYPES = ("GpuUsage", "GpuMemoryUsage")


async def ours(provider: AihcProvider, listing: Listing, count: int) -> float:
    """CPU seconds per call through `provider.read`."""
    units, pending = listing.units, iter(range(count))

    async def worker() -> None:
        for k in pending:
            unit = units[k % len(units)]
            item = TYPES[(k // len(units)) % len(TYPES)]
            result = await provider.read(
                unit, item, ReadContext(time.monotonic() + 60, time.time())
            )
            if result.failed:
                raise SystemExit(f"a read failed: {unit.job_id} {item}")

    started = time.process_time()
    await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
    return (time.process_time() - started) / count


async def bare(url: str, rate: float, count: int) -> float:
    """CPU seconds per call, signed ahead, through one bare `aiohttp.ClientSession`
    (`bench.transport_floor`'s measured phase)."""
    sent, cpu, failed, _ = await transport_floor.run(url, rate, count)
    if failed:
        raise SystemExit(f"the bare client got {failed} replies other than 200")
    return cpu / sent


async def run(args: argparse.Namespace) -> tuple[list[float], list[float]]:
    simulator, url = start_simulator(
        ["--seed", "42", "--aihc-jobs", str(args.jobs), "--aihc-pods", "8"]
    )
    try:
        limits = {"requests_per_second": args.rate, "max_concurrency": CONNECTIONS}
        target = demo_target(url, "path", limits=limits)
        provider = AihcProvider(target, SelfMetrics(), tier_plan(target, 60.0))
        try:
            listing = await provider.list_jobs(PollContext(time.monotonic() + 60, time.time()))
            # Every job's series made and its first window read, as in steady polling.
            await ours(provider, listing, len(listing.units) * len(TYPES))
            mine, floor = [], []
            for _ in range(args.rounds):
                mine.append(await ours(provider, listing, args.requests))
                floor.append(await bare(url, args.rate, args.requests))
        finally:
            await provider.close()
    finally:
        simulator.kill()
        simulator.wait()
    return mine, floor


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--requests", type=int, default=1200, help="calls a round, each side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=160.0, help="requests per second")
    args = parser.parse_args()
    mine, floor = asyncio.run(run(args))

    def ms(values: list[float]) -> str:
        return "/".join(f"{v * 1e3:.3f}" for v in values)

    ratio = statistics.median(mine) / statistics.median(floor)
    print(
        f"path    jobs={args.jobs} requests={args.requests} rounds={args.rounds} "
        f"rate={args.rate:g} ours_cpu_ms_per_request={ms(mine)} "
        f"bare_aiohttp_cpu_ms_per_request={ms(floor)} ours/bare={ratio:.2f} "
        f"above_bare_ms={(statistics.median(mine) - statistics.median(floor)) * 1e3:.3f}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
