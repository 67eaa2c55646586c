"""Refresh tiers through the whole exporter, against the simulator over HTTP: calls per tier
follow the plan, are spread over the interval, stretch slowest first under a short budget,
a slow part lives between its reads and goes past its own bound, and a new job is read in
full within one fast interval of being listed."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Settings
from exporter.server import STATE, build_app
from exporter.simulator import LoggedRequest, Simulator, running
from exporter.simulator.aihc import AihcWorld
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
            assert await app[STATE].scheduler.wait_ready(20)
            yield Rig(client, simulator)

    return make


async def test_calls_per_tier_over_a_window_match_the_plan(rig_factory) -> None:  # type: ignore[no-untyped-def]
    async for rig in rig_factory(jobs=4):
        since = time.monotonic()
        await asyncio.sleep(8.0)
        window = rig.reads(since, since + 8.0)
        per_unit = Counter((e.subject[0], e.subject[1]) for e in window)
        expected = {"fast": 8, "medium": 4, "slow": 2}
        assert len(per_unit) == 4 * len(TIER), sorted(per_unit)
        for (job, item), count in per_unit.items():
            assert abs(count - expected[TIER[item]]) <= 1, (job, item, count)
        per_tier = Counter()
        for (_, item), count in per_unit.items():
            per_tier[TIER[item]] += count
        # 4 jobs: 1 fast item, 2 medium (CpuUsage, pods), 1 slow.
        assert abs(per_tier["fast"] - 4 * 8) <= 4
        assert abs(per_tier["medium"] - 8 * 4) <= 8
        assert abs(per_tier["slow"] - 4 * 2) <= 4
        lists = [e for e in rig.simulator.log.entries if since <= e.at < since + 8.0]
        assert abs(sum(e.endpoint == "DescribeJobs" for e in lists) - 8) <= 1


async def test_calls_are_spread_over_the_interval_not_burst(rig_factory) -> None:  # type: ignore[no-untyped-def]
    # 24 jobs, one fast item every 1 s: a burst at the round's start would put the 24 calls
    # of a round in its first tenth; spread, a tenth of the second holds about 2.4.
    async for rig in rig_factory(
        jobs=24, metric_types=["GpuUsage"], tiers={"move": {"pods": "slow"}}
    ):
        since = time.monotonic()
        await asyncio.sleep(4.0)
        fast = [e.at for e in rig.reads(since, since + 4.0) if e.subject[1] == "GpuUsage"]
        assert abs(len(fast) - 96) <= 24
        tenths = Counter(int((at - since) * 10) for at in fast)
        assert max(tenths.values()) <= 8, sorted(tenths.items())


async def test_short_budget_stretches_slow_tiers_first_and_gauges_say_so(rig_factory) -> None:  # type: ignore[no-untyped-def]
    # Per second: 2 list pages + 4 fast + 4 x 2 medium / 2 + 4 slow / 4 = 10 requests; the
    # budget is 8 (7.6 after headroom). Slow stretches to 4 x 4 s = 16 s (0.25/s), then medium
    # takes what is left: 8 calls / (7.6 - 2 - 4 - 0.25) = 5.93 s. Fast stays at 1 s.
    async for rig in rig_factory(jobs=4, budget=8.0, page_size=2):
        g = await rig.gauges()
        labels = (("provider", "aihc"), ("target", "pool"))
        required = g[("training_exporter_budget_required_requests_per_second", labels)]
        assert required == pytest.approx(2 + 4 + 4 + 1)
        assert g[("training_exporter_budget_requests_per_second", labels)] == 8.0
        interval = {
            dict(key)["tier"]: value
            for (name, key), value in g.items()
            if name == "training_exporter_tier_interval_seconds"
        }
        assert interval["fast"] == 1.0
        assert interval["slow"] == pytest.approx(16.0)
        assert interval["medium"] == pytest.approx(8 / (7.6 - 2 - 4 - 0.25))
        since = time.monotonic()
        await asyncio.sleep(6.0)
        fast = Counter(
            e.subject[0] for e in rig.reads(since, since + 6.0) if e.subject[1] == "GpuUsage"
        )
        assert len(fast) == 4 and all(abs(n - 6) <= 1 for n in fast.values()), fast


async def test_required_budget_gauge_is_the_arithmetic_at_the_current_counts(rig_factory) -> None:  # type: ignore[no-untyped-def]
    async for rig in rig_factory(jobs=6, page_size=4):
        labels = (("provider", "aihc"), ("target", "pool"))
        key = ("training_exporter_budget_required_requests_per_second", labels)
        # 2 pages/1 s + 6 x (1 fast / 1 s + 2 medium / 2 s + 1 slow / 4 s)
        assert (await rig.gauges())[key] == pytest.approx(2 + 6 * (1 + 1 + 0.25))
        assert rig.world is not None
        for job_id in list(rig.world.jobs)[:3]:
            rig.world.remove_job(job_id)
        await asyncio.sleep(1.5)
        assert (await rig.gauges())[key] == pytest.approx(1 + 3 * (1 + 1 + 0.25))


async def test_a_slow_part_lives_between_its_reads_and_goes_past_its_own_bound(rig_factory) -> None:  # type: ignore[no-untyped-def]
    # stale_after 2 s: the fast tier's bound; slow parts (4 s tier) get 8 s.
    async for rig in rig_factory(jobs=1, stale_after=2.0):
        names = await rig.names()
        assert {
            "training_pod_gpu_utilization_ratio",
            "training_pod_gpu_temperature_celsius",
        } <= names
        rig.simulator.faults.only = frozenset({"DescribeJobMetrics"})
        rig.simulator.faults.error_rates = {500: 1.0}
        failing = time.monotonic()
        gpu_gone = temp_gone = None
        while temp_gone is None and time.monotonic() - failing < 15:
            names = await rig.names()
            now = time.monotonic() - failing
            if gpu_gone is None and "training_pod_gpu_utilization_ratio" not in names:
                gpu_gone = now
            if "training_pod_gpu_temperature_celsius" not in names:
                temp_gone = now
            await asyncio.sleep(0.1)
        assert gpu_gone is not None and temp_gone is not None
        # GPU utilisation goes within its 2 s bound (+ a 1 s checkpoint); temperature was
        # older than that bound and stayed, then went within its own 8 s.
        assert gpu_gone <= 2 + 1.5
        assert temp_gone > gpu_gone + 0.5
        good = [e.at for e in rig.reads(0, failing) if e.subject[1] == "GpuTemperature"]
        assert temp_gone + failing - good[-1] <= 8 + 1.5


async def test_a_new_job_is_read_in_full_within_one_fast_interval_of_being_listed(
    rig_factory,
) -> None:  # type: ignore[no-untyped-def]
    async for rig in rig_factory(jobs=2):
        assert rig.world is not None
        job = rig.world.add_job(queue="q", status="Running", pods=2)
        added = time.monotonic()
        await asyncio.sleep(2.5)
        listed = min(
            e.at for e in rig.simulator.log.entries if e.endpoint == "DescribeJobs" and e.at > added
        )
        first = {}
        for e in rig.reads(added, added + 2.5):
            if e.subject[0] == job.job_id:
                first.setdefault(e.subject[1], e.at)
        assert set(first) == set(TIER), first
        # The slow tier's turn would be 4 s away; the first full read is within 1 s.
        assert max(first.values()) - listed <= 1.0
