"""A long job list is placed in batches: the event loop serves scrapes between them."""

from __future__ import annotations

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
from tests.loop_turns import longest_turn

JOBS = 1000


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


async def listing_turn(url: str) -> tuple[float, float]:
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
        longest, whole, _ = await longest_turn(provider.list_jobs(context))
    finally:
        await provider.close()
    return longest, whole


async def test_placing_a_thousand_jobs_lets_the_loop_turn(url: str) -> None:
    longest, whole = await listing_turn(url)
    assert longest < whole / 4
