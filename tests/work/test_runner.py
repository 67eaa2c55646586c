"""Refresh tiers through the whole exporter, against the simulator over HTTP: the plan's
gauges follow the job count, and a failed listing keeps the known jobs read. Bounds are
`merge`'s (`tests/test_model.py`). The schedule itself is tested on
simulated time (`test_schedule.py`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Settings
from exporter.server import build_app
from exporter.simulator import LoggedRequest, Simulator, running
from exporter.simulator.aihc import AihcWorld
from tests.scrape_helpers import until_ready
from tests.target_helpers import TEST_POOL, aihc_target

ClientFactory = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]
# GpuUsage is fast, CpuUsage and the pods medium, GpuTemperature slow (the defaults).
TYPES = ["GpuUsage", "CpuUsage", "GpuTemperature"]
TIER = {"GpuUsage": "fast", "CpuUsage": "medium", "pods": "medium", "GpuTemperature": "slow"}
UNLIMITED = 10_000.0


class Rig:
    def __init__(self, client: TestClient[Any, Any], simulator: Simulator) -> None:
        self.client = client
        self.simulator = simulator
        self.world = simulator.aihc
        assert self.world is not None

    async def gauges(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = await (await self.client.get("/metrics")).text()
        return {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }

    async def names(self) -> set[str]:
        return {name for name, _ in await self.gauges()}

    def reads(self, since: float, until: float) -> list[LoggedRequest]:
        return [
            e
            for e in self.simulator.log.entries
            if since <= e.at < until and e.subject[0] and e.status == 200
        ]


def gpu_read(rig: Rig, since: float) -> set[str]:
    """The jobs whose GPU utilisation was read since `since`."""
    return {e.subject[0] for e in rig.reads(since, time.monotonic()) if e.subject[1] == "GpuUsage"}


@pytest.fixture
def rig_factory(aiohttp_client: ClientFactory) -> Callable[..., Any]:
    async def make(jobs: int = 4, budget: float = UNLIMITED, **target: Any) -> AsyncIterator[Rig]:
        world = AihcWorld.fixed(seed=9, pools={TEST_POOL: ["q"]}, jobs=jobs, pods_per_job=2)
        simulator = Simulator(seed=9, aihc=world)
        async with running(simulator) as served:
            fields: dict[str, Any] = {
                "metric_types": TYPES,
                "events": False,
                "tiers": {"medium": "2s", "slow": "4s"},
                "limits": {"requests_per_second": budget, "max_concurrency": 8},
                **target,
            }
            stale_after = fields.pop("stale_after", None)
            settings = Settings(
                poll_interval=1.0, stale_after=stale_after, aihc=[aihc_target(served.url, **fields)]
            )
            app = build_app(settings)
            client = await aiohttp_client(app)
            await until_ready(client)
            yield Rig(client, simulator)

    return make


async def test_required_budget_gauge_is_the_arithmetic_at_the_current_counts(rig_factory) -> None:  # type: ignore[no-untyped-def]
    async for rig in rig_factory(jobs=6, page_size=4):
        labels = (("provider", "aihc"), ("target", "pool"))
        key = ("training_exporter_budget_required_requests_per_second", labels)
        # 2 pages/1 s + 6 x (1 fast / 1 s + 2 medium / 2 s + 1 slow / 4 s)
        assert (await rig.gauges())[key] == pytest.approx(2 + 6 * (1 + 1 + 0.25))
        assert rig.world is not None
        for job_id in list(rig.world.jobs)[:3]:
            rig.world.remove_job(job_id)
        # The next listing (a round, 1 s) sees 3 jobs.
        deadline = time.monotonic() + 10
        while (await rig.gauges())[key] != pytest.approx(1 + 3 * (1 + 1 + 0.25)):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)


async def test_a_failed_listing_keeps_every_job_read_and_says_up_0(rig_factory) -> None:  # type: ignore[no-untyped-def]
    # DescribeJobs answers 500 for three rounds: the jobs known keep their GPU reads, and up
    # is 0 once the first failed listing is over.
    async for rig in rig_factory(jobs=4):
        labels = (("provider", "aihc"), ("target", "pool"))
        rig.simulator.faults.only = frozenset({"DescribeJobs"})
        rig.simulator.faults.error_rates = {500: 1.0}
        failing = time.monotonic()
        # A listing retries until its round's end: the first has failed within two rounds;
        # meanwhile every job's GPU is read (each round, 1 s).
        while (await rig.gauges())[("training_exporter_up", labels)] != 0 or len(
            gpu_read(rig, failing)
        ) < 4:
            assert time.monotonic() < failing + 3, gpu_read(rig, failing)
            await asyncio.sleep(0.1)
        rig.simulator.faults.error_rates = {}
        series = await rig.names()
        assert "training_pod_gpu_utilization_ratio" in series
