"""The status pages of a big target: size and time of each, against a scrape of the same
exporter measured in the same run.

The whole exporter (`exporter.server.build_app`) polls a simulated AIHC pool of `--jobs` jobs
(1 pod each, Pending: their pods are read, their metrics are not) over HTTP; once the list is
in the snapshot, each page is fetched `--repeats` times over loopback. The floor is
`/-/healthy` (the HTTP path alone); `/metrics`, which serves cached bytes, is the peer a page
must not cost more than.

    python -m bench.pages                 # 5,000 jobs, 20 fetches a page
    python -m bench.pages --jobs 20000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import aiohttp
from aiohttp import web

from exporter.config import Settings
from exporter.providers.aihc import AihcTarget
from exporter.server import build_app
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld

POOL = "cce-bench001"


async def fetch(session: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    started = time.perf_counter()
    async with session.get(url) as response:
        body = await response.read()
        assert response.status == 200, (url, response.status)
    return time.perf_counter() - started, len(body)


async def measure(jobs: int, repeats: int) -> None:
    world = AihcWorld.fixed(jobs=jobs, pods_per_job=1, status="Pending", pools={POOL: ["q"]})
    async with running(Simulator(seed=7, aihc=world)) as sim:
        target = AihcTarget.model_validate(
            {
                "name": "big",
                "endpoint": sim.url,
                "access_key_id": DEMO_ACCESS_KEY_ID,
                "secret_access_key": DEMO_SECRET_ACCESS_KEY,
                "resource_pool_id": POOL,
                "page_size": 1000,
                "events": False,
            }
        )
        runner = web.AppRunner(
            build_app(Settings.model_validate({"poll_interval": 3600, "aihc": [target]}))
        )
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        try:
            async with aiohttp.ClientSession() as session:
                await _wait_listed(session, base, jobs)
                paths = (
                    "/-/healthy",
                    "/metrics",
                    "/",
                    "/status.json",
                    "/targets/big/jobs",
                    "/targets/big/jobs.json",
                    "/targets/big/calls",
                )
                results = {}
                for path in paths:
                    await fetch(session, base + path)
                    runs = [await fetch(session, base + path) for _ in range(repeats)]
                    results[path] = (statistics.median(t for t, _ in runs), runs[-1][1])
        finally:
            await runner.cleanup()
    floor, peer = results["/-/healthy"][0], results["/metrics"][0]
    print(f"{jobs} jobs, median of {repeats} fetches each")
    print(f"{'path':24} {'bytes':>11} {'median ms':>10} {'x floor':>8} {'x /metrics':>11}")
    for path, (median, size) in results.items():
        print(
            f"{path:24} {size:>11,} {median * 1000:>10.1f} {median / floor:>8.1f}"
            f" {median / peer:>11.2f}"
        )


async def _wait_listed(session: aiohttp.ClientSession, base: str, jobs: int) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        async with session.get(base + "/status.json") as response:
            if (await response.json())["targets"][0]["jobs"] >= jobs:
                return
        await asyncio.sleep(0.2)
    raise SystemExit("the job list never reached the snapshot")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(measure(args.jobs, args.repeats))


if __name__ == "__main__":
    main()
