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
from exporter.server import build_app
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_api import ServiceError
from exporter.simulator.aihc_jobs import SimPod
from tests.scrape_helpers import Found, parse, until_ready, value
from tests.target_helpers import TEST_POOL, aihc_target

UP = {"provider": "aihc", "target": "pool"}
UP_NAME = "training_exporter_up"


def discovery_errors(found: Found) -> float:
    return value(found, "training_exporter_discovery_errors_total", **UP) or 0


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

    async def until(self, done: Callable[[Found], bool], timeout: float = 15) -> Found:
        """The first scrape for which `done` holds, scraping as Prometheus would (the last
        complete rendering); waits on what a test checks, not for a guessed time. A scrape is
        parsed whole, so once a quarter second: rounds here are a second apart."""
        deadline = time.monotonic() + timeout
        while not done(found := await self.scrape()):
            assert time.monotonic() < deadline, f"not within {timeout} s"
            await asyncio.sleep(0.25)
        return found

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
                await until_ready(client)
            yield Rig(client, simulator)

    return make


async def test_pages_that_repeat_stop_the_listing_logged_once_and_counted(rig_factory) -> None:  # type: ignore[no-untyped-def]
    """Seven jobs in pages of three: three pages, so a listing that stopped only at the total
    would ask for a third."""
    async for rig in rig_factory(jobs=7, page_size=3):
        before = await rig.scrape()
        assert len(before["training_job_info"]) == 7

        def every_page_is_the_first(action: str, body: dict[str, Any]) -> None:
            if action == "DescribeJobs":
                body["pageNumber"] = 1

        rig.world.before_action = every_page_is_the_first
        before_errors = discovery_errors(before)
        since = time.monotonic()
        with capture_logs() as logs:
            # The first round whose list stopped: its jobs are carried under the staleness
            # rule (3 s here), not dropped.
            found = await rig.until(lambda f, n=before_errors: discovery_errors(f) > n)
            assert len(found["training_job_info"]) == 7
            # And a second one.
            await rig.until(lambda f, n=before_errors: discovery_errors(f) >= n + 2)
            calls = rig.calls("DescribeJobs", since)
            rounds = discovery_errors(await rig.scrape()) - before_errors
        # Two pages a round (the first, then its repeat), not 1,000; the next round may have
        # sent its first, or both.
        assert 2 * rounds <= calls <= 2 * rounds + 2, (calls, rounds)
        stops = [e for e in logs if e["event"].startswith("job list stopped")]
        assert len(stops) == 1 and stops[0]["reason"] == "page 2 repeats an earlier page"
        assert await rig.value("training_exporter_up", **UP) == 0
        # Past their bound, the unconfirmed jobs go.
        await rig.until(lambda f: "training_job_info" not in f)


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

        def api_codes(found: Found) -> set[str]:
            return {
                labels["code"]
                for labels, _ in found.get("training_exporter_api_requests_total", [])
                if labels["endpoint"] == "DescribeJobMetrics"
            }

        # Once the 404 is counted and the job's detail was read to confirm it.
        series = await rig.until(
            lambda found: (
                "404" in api_codes(found) and value(found, "training_exporter_up", **UP) == 0
            )
        )
        jobs = {labels["job_id"] for labels, _ in series["training_job_info"]}
        assert jobs == set(rig.world.jobs), "a 404 on a type must not drop the job"
        gpu = {labels["job_id"] for labels, _ in series["training_pod_gpu_utilization_ratio"]}
        assert job_id in gpu
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
            # Two rounds' lists, and the first round's refusal counted.
            await rig.until(lambda found: value(found, "training_exporter_up", **UP) == 0)
            deadline = time.monotonic() + 15
            while rig.calls("DescribeJobs") < 2:
                assert time.monotonic() < deadline, "no second round"
                await asyncio.sleep(0.05)
            per_round = rig.calls("DescribeJobMetrics") / max(1, rig.calls("DescribeJobs"))
            # At most the 8 workers' calls in flight when the first 403 came back, per round.
            assert per_round <= 8 + 1, per_round
            assert rig.calls("DescribeJobMetrics") < 20 * 22 / 4
            assert await rig.value("training_exporter_up", **UP) == 0
    refused = [e for e in logs if e["event"].startswith("credentials refused")]
    assert len(refused) == 1


# Seconds after a 429 in which calls already let through may still reach the simulator.
IN_FLIGHT = 0.5


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
            await rig.until(lambda found: value(found, "training_exporter_up", **UP) == 0)
            deadline = time.monotonic() + 15
            while not [e for e in rig.simulator.log.entries if e.at > paused_at + 2.9]:
                assert time.monotonic() < deadline, "calls resume once the pause is over"
                await asyncio.sleep(0.05)
        # Calls the gate let through before the 429 was read may still arrive just after it
        # (a loaded loop writes them late); none may come after that until the pause is over.
        quiet = [
            e for e in rig.simulator.log.entries if paused_at + IN_FLIGHT < e.at < paused_at + 2.9
        ]
        assert quiet == [], "no call may go out while the target is paused"
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
        await until_ready(rig.client)

        def dropped(found: Found) -> dict[str, float]:
            return {
                labels["reason"]: count
                for labels, count in found.get("training_exporter_dropped_values_total", [])
            }

        # Once every unusable element was read and counted: the events tier is medium.
        series = await rig.until(
            lambda found: (
                dropped(found).get("invalid_item", 0) >= 3
                and dropped(found).get("invalid_series", 0) >= 1
                and dropped(found).get("invalid_sample", 0) >= 1
                and "Started"
                in {
                    labels["reason"]
                    for labels, _ in found.get("training_job_events_total", [])
                    if labels["job_id"] == broken["odd"]
                }
            )
        )
        jobs = {labels["job_id"] for labels, _ in series["training_job_info"]}
        # The other jobs of the page stay: one unusable job used to refuse the whole page.
        assert jobs == set(rig.world.jobs) - {broken["nameless"]}
        pods = [labels["pod"] for labels, _ in series["training_pod_info"]]
        assert "" not in pods and len([p for p in pods if p.startswith(broken["odd"])]) == 2
        reasons = dropped(series)
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
