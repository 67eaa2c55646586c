"""AIHC error paths through the whole exporter, against the simulator over HTTP: pages that
make no progress stop the listing, a 404 on one type keeps the job, refused credentials stop
the round's remaining calls, a long Retry-After pauses the target, and a job that just failed
gets its JobFailed event exported, and an element of a reply that does not fit (a job without
its id) is dropped and counted alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from structlog.testing import capture_logs

from exporter.config import Settings
from exporter.server import STATE, build_app
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld, ServiceError, SimPod
from tests.scrape_helpers import Found, parse, value
from tests.target_helpers import TEST_POOL, aihc_target

UP = {"provider": "aihc", "target": "pool"}


class Rig:
    def __init__(self, client: TestClient[Any, Any], simulator: Simulator) -> None:
        self.client = client
        self.simulator = simulator
        assert simulator.aihc is not None
        self.world: AihcWorld = simulator.aihc

    async def scrape(self) -> Found:
        return parse(await (await self.client.get("/metrics")).text())

    async def value(self, name: str, **labels: str) -> float | None:
        return value(await self.scrape(), name, **labels)

    def calls(self, endpoint: str, since: float = 0.0) -> int:
        return sum(
            1 for e in self.simulator.log.entries if e.endpoint == endpoint and e.at >= since
        )


@pytest.fixture
def rig_factory(aiohttp_client: Callable[..., Any]) -> Callable[..., Any]:
    async def make(
        jobs: int = 3, ready: bool = True, hook: Any = None, **target: Any
    ) -> AsyncIterator[Rig]:
        world = AihcWorld.fixed(seed=4, pools={TEST_POOL: ["q"]}, jobs=jobs, pods_per_job=2)
        world.before_action = hook
        simulator = Simulator(seed=4, aihc=world)
        async with running(simulator) as served:
            fields: dict[str, Any] = {
                "metric_types": ["GpuUsage", "CpuUsage"],
                "limits": {"requests_per_second": 10_000, "retries": 0, "timeout": 5},
                **target,
            }
            settings = Settings(poll_interval=1.0, aihc=[aihc_target(served.url, **fields)])
            app = build_app(settings)
            client = await aiohttp_client(app)
            if ready:
                assert await app[STATE].scheduler.wait_ready(20)
            yield Rig(client, simulator)

    return make


async def test_pages_that_repeat_stop_the_listing_logged_once_and_counted(rig_factory) -> None:  # type: ignore[no-untyped-def]
    async for rig in rig_factory(jobs=25, page_size=10):
        before = await rig.scrape()
        assert len(before["training_job_info"]) == 25

        def every_page_is_the_first(action: str, body: dict[str, Any]) -> None:
            if action == "DescribeJobs":
                body["pageNumber"] = 1

        rig.world.before_action = every_page_is_the_first
        since = time.monotonic()
        with capture_logs() as logs:
            await asyncio.sleep(1.5)
            # Not listed: the jobs are carried under the staleness rule (3 s here), not dropped.
            assert len((await rig.scrape())["training_job_info"]) == 25
            await asyncio.sleep(1.7)
        rounds = rig.calls("DescribeJobs", since) / 2
        # Two pages a round (the first, then its repeat), not 1,000.
        assert 2 <= rounds <= 4 and rig.calls("DescribeJobs", since) % 2 == 0
        stops = [e for e in logs if e["event"].startswith("job list stopped")]
        assert len(stops) == 1 and stops[0]["reason"] == "page 2 repeats an earlier page"
        errors = await rig.value("training_exporter_discovery_errors_total", **UP)
        assert errors is not None and errors >= 2
        assert await rig.value("training_exporter_up", **UP) == 0
        # Past their bound, the unconfirmed jobs go.
        deadline = time.monotonic() + 3
        while "training_job_info" in await rig.scrape():
            assert time.monotonic() < deadline, "carried jobs must go past their bound"
            await asyncio.sleep(0.1)


async def test_a_404_on_one_type_fails_that_part_and_keeps_the_job(rig_factory) -> None:  # type: ignore[no-untyped-def]
    doomed: list[str] = []

    def cpu_not_found(action: str, body: dict[str, Any]) -> None:
        cpu = action == "DescribeJobMetrics" and body.get("metricType") == "CpuUsage"
        if cpu and body.get("jobId") in doomed:
            raise ServiceError("NotFound", "no such metric", 404)

    async for rig in rig_factory(jobs=2, hook=cpu_not_found, tiers={"move": {"CpuUsage": "fast"}}):
        job_id = sorted(rig.world.jobs)[0]
        doomed.append(job_id)
        since = time.monotonic()
        await asyncio.sleep(2.5)
        series = await rig.scrape()
        jobs = {labels["job_id"] for labels, _ in series["training_job_info"]}
        assert jobs == set(rig.world.jobs), "a 404 on a type must not drop the job"
        gpu = {labels["job_id"] for labels, _ in series["training_pod_gpu_utilization_ratio"]}
        assert job_id in gpu
        codes = {
            labels["code"]
            for labels, _ in series["training_exporter_api_requests_total"]
            if labels["endpoint"] == "DescribeJobMetrics"
        }
        assert "404" in codes
        assert await rig.value("training_exporter_up", **UP) == 0
        # Each 404 was checked with one DescribeJob (the job answered: it exists).
        confirms = sum(
            1
            for e in rig.simulator.log.entries
            if e.at >= since and e.endpoint == "DescribeJob" and e.subject[0] == job_id
        )
        assert confirms >= 1


async def test_refused_credentials_stop_the_rest_of_the_rounds_calls(rig_factory) -> None:  # type: ignore[no-untyped-def]
    def refuse_metrics(action: str, body: dict[str, Any]) -> None:
        if action == "DescribeJobMetrics":
            raise ServiceError("AccessDenied", "signature does not match", 403)

    # 20 jobs x 24 calls are due at once at start; only those already in flight go out.
    with capture_logs() as logs:
        async for rig in rig_factory(
            jobs=20, ready=False, hook=refuse_metrics, metric_types=[], events=True
        ):
            await asyncio.sleep(1.5)
            per_round = rig.calls("DescribeJobMetrics") / max(1, rig.calls("DescribeJobs"))
            # At most the 8 workers' calls in flight when the first 403 came back, per round.
            assert per_round <= 8 + 1, per_round
            assert rig.calls("DescribeJobMetrics") < 20 * 22 / 4
            assert await rig.value("training_exporter_up", **UP) == 0
    refused = [e for e in logs if e["event"].startswith("credentials refused")]
    assert len(refused) == 1


async def test_a_long_retry_after_pauses_the_target_and_shows_it_down(rig_factory) -> None:  # type: ignore[no-untyped-def]
    async for rig in rig_factory(jobs=2):
        assert await rig.value("training_exporter_up", **UP) == 1
        rig.simulator.faults.retry_after = "3"
        rig.simulator.faults.script.append(429)
        with capture_logs() as logs:
            hit = time.monotonic()
            while not any(e.status == 429 for e in rig.simulator.log.entries):
                await asyncio.sleep(0.02)
                assert time.monotonic() - hit < 5
            paused_at = next(e.at for e in rig.simulator.log.entries if e.status == 429)
            await asyncio.sleep(1.5)
            assert await rig.value("training_exporter_up", **UP) == 0
            quiet = [e for e in rig.simulator.log.entries if paused_at < e.at < paused_at + 2.9]
            assert quiet == [], "no call may go out while the target is paused"
            await asyncio.sleep(3.0)
        resumed = [e for e in rig.simulator.log.entries if e.at > paused_at + 2.9]
        assert resumed, "calls resume once the pause is over"
        pauses = [e for e in logs if e["event"].startswith("provider asked to wait")]
        assert len(pauses) == 1 and pauses[0]["paused_seconds"] == pytest.approx(3, abs=0.2)


async def test_a_job_that_just_failed_gets_its_job_failed_event_exported(rig_factory) -> None:  # type: ignore[no-untyped-def]
    async for rig in rig_factory(jobs=2, tiers={"medium": "1h"}):
        job_id = sorted(rig.world.jobs)[0]
        rig.world.set_status(job_id, "Failed")
        deadline = time.monotonic() + 5
        reasons: set[str] = set()
        while time.monotonic() < deadline and "JobFailed" not in reasons:
            events = (await rig.scrape()).get("training_job_events_total", [])
            reasons = {labels["reason"] for labels, _ in events if labels["job_id"] == job_id}
            await asyncio.sleep(0.1)
        # The events tier comes round hourly here: this is the final read, at once.
        assert {"JobFailed", "Error"} <= reasons
        series = await rig.scrape()
        phases = [
            labels["phase"]
            for labels, value in series["training_pod_phase"]
            if labels["job_id"] == job_id and value == 1
        ]
        assert phases and set(phases) <= {"Failed", "Unknown"}
        gpu = {labels["job_id"] for labels, _ in series["training_pod_gpu_utilization_ratio"]}
        assert job_id not in gpu, "a finished job's resource series go"


async def test_an_unusable_element_is_dropped_alone_and_counted(rig_factory) -> None:  # type: ignore[no-untyped-def]
    broken: dict[str, str] = {}

    def break_elements(world: AihcWorld) -> None:
        nameless, odd = sorted(world.jobs)[:2]
        broken.update(nameless=nameless, odd=odd)
        # A list item without its id, a pod without its name (its metric series too), an
        # event whose reason is an object, and a point whose value is a list.
        world.jobs[nameless].job_id = ""
        world.jobs[odd].pods.append(SimPod(""))
        world.jobs[odd].event_items = [
            {"reason": {"x": 1}, "message": "m", "lastTimestamp": "2026-01-01T00:00:00Z"},
            {"reason": "Started", "message": "m", "lastTimestamp": "2026-01-01T00:00:00Z"},
        ]
        pod = world.jobs[odd].pods[0].name
        world.jobs[odd].values[("GpuUsage", pod)] = ["50", ["not", "a", "number"]]  # type: ignore[list-item]

    def once(action: str, body: dict[str, Any]) -> None:
        if not broken:
            break_elements(rig_world[0])

    rig_world: list[AihcWorld] = []
    async for rig in rig_factory(jobs=3, ready=False, hook=once, events=True):
        rig_world.append(rig.world)
        assert await rig.client.app[STATE].scheduler.wait_ready(20)
        await asyncio.sleep(1.2)
        series = await rig.scrape()
        jobs = {labels["job_id"] for labels, _ in series["training_job_info"]}
        # The other jobs of the page stay: one unusable job used to refuse the whole page.
        assert jobs == set(rig.world.jobs) - {broken["nameless"]}
        pods = [labels["pod"] for labels, _ in series["training_pod_info"]]
        assert "" not in pods and len([p for p in pods if p.startswith(broken["odd"])]) == 2
        reasons = {
            labels["reason"]: count
            for labels, count in series["training_exporter_dropped_values_total"]
        }
        # A job per list page read, a pod per detail, an event, a series and a point.
        assert reasons.get("invalid_item", 0) >= 3
        assert reasons.get("invalid_series", 0) >= 1 and reasons.get("invalid_sample", 0) >= 1
        events = {
            labels["reason"]
            for labels, _ in series["training_job_events_total"]
            if labels["job_id"] == broken["odd"]
        }
        assert events == {"Started"}
        codes = {labels["code"] for labels, _ in series["training_exporter_api_requests_total"]}
        assert codes == {"200"}, "no call fails for one unusable element"
        assert await rig.value("training_exporter_up", **UP) == 1
