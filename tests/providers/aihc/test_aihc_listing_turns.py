"""A long job list is placed in batches: the event loop serves scrapes between them."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator

import pytest
from pydantic import SecretStr

from bench.simulator import start_simulator
from exporter.providers.aihc import AihcProvider, AihcTarget
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.targets import tier_plan

JOBS = 1000
# How often the ticker asks for a turn: often enough to see each of the loop's steps, and
# seldom enough that its own CPU does not count as the listing's.
TICK = 0.001


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A simulator of a thousand jobs in its own process: its CPU is not the loop's here."""
    process, url = start_simulator(["--aihc-jobs", str(JOBS), "--aihc-pods", "1"])
    try:
        yield url
    finally:
        process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


async def longest_turn(url: str) -> tuple[float, float]:
    """(the longest CPU time the loop spent away from a ticker during a listing, the
    listing's CPU time), on the second listing (the first makes each job's identity)."""
    target = AihcTarget(
        name="turns",
        endpoint=url,
        resource_pool_id=DEMO_RESOURCE_POOL,
        access_key_id=SecretStr(DEMO_ACCESS_KEY_ID),
        secret_access_key=SecretStr(DEMO_SECRET_ACCESS_KEY),
    )
    provider = AihcProvider(target, SelfMetrics(), tier_plan(target, 60.0))
    context = PollContext(deadline=time.monotonic() + 60, started_at=time.time())
    try:
        listing = await provider.list_jobs(context)
        assert len(listing.units) == JOBS
        turns: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.thread_time()
            while not done.is_set():
                await asyncio.sleep(TICK)
                now = time.thread_time()
                turns.append(now - last)
                last = now

        # A full collection of the test process's heap can take one turn longer than the
        # listing's own; the collector is not what is measured.
        gc.disable()
        task = asyncio.create_task(ticker())
        started = time.thread_time()
        await provider.list_jobs(context)
        whole = time.thread_time() - started
        done.set()
        await task
        gc.enable()
    finally:
        await provider.close()
    return max(turns), whole


async def test_placing_a_thousand_jobs_lets_the_loop_turn(url: str) -> None:
    longest, whole = await longest_turn(url)
    assert longest < whole / 4
