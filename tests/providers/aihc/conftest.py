"""Fixtures: a simulated AIHC over real HTTP (one pool, three queues, 23 jobs by default)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from tests.providers.aihc.aihc_helpers import JOBS, POOL, QUEUES, Harness


@pytest.fixture
def world(request: pytest.FixtureRequest) -> AihcWorld:
    """One pool, three queues, 23 running jobs of two pods each, or as many as a test asks
    for with `jobs(n)`."""
    return AihcWorld.fixed(seed=3, pools={POOL: list(QUEUES)}, jobs=getattr(request, "param", JOBS))


@pytest.fixture
async def harness(world: AihcWorld) -> AsyncIterator[Harness]:
    simulator = Simulator(seed=3, aihc=world)
    async with running(simulator) as served:
        bench = Harness(world, simulator, served.url)
        try:
            yield bench
        finally:
            await bench.close()
