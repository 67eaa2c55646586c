"""One test per upstream fault, through the whole exporter: it keeps serving, reports the
target down with the right request code, keeps the last good data for `stale_after`, drops
it after, and comes back up on the next good poll."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from aiohttp.test_utils import TestClient

from exporter.config import Limits, Settings
from exporter.server import STATE, build_app
from exporter.simulator import Faults, Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.work.runner import TargetRunner
from tests.runner_helpers import SteppedClock, poll_once, quiet
from tests.scrape_helpers import Found, parse, rendered, until_ready, value
from tests.target_helpers import aihc_target

POOL = "cce-test0001"
GPU = "training_pod_gpu_utilization_ratio"
METRICS = "DescribeJobMetrics"
# The poll interval, on the rig's simulated clock: a poll (`poll_once`) moves it on by the
# slowest tier's interval (15 x this) and then by this.
POLL = 60.0


@dataclass
class Rig:
    client: TestClient
    faults: Faults
    poller: TargetRunner
    clock: SteppedClock

    async def poll(self) -> None:
        await poll_once(self.poller, self.clock)

    async def scrape(self) -> Found:
        """A scrape once the rendering holds the store as it is (the test's last poll)."""
        await rendered(self.client.app)
        resp = await self.client.get("/metrics")
        assert resp.status == 200
        return parse(await resp.text())


def target(url: str, stale_after: float) -> Settings:
    aihc = aihc_target(
        url,
        metric_types=["GpuUsage", "CpuUsage"],
        limits=Limits(retries=1, timeout=1.0, requests_per_second=0, max_concurrency=8),
    )
    return Settings(poll_interval=POLL, stale_after=stale_after, aihc=[aihc])


@pytest.fixture
async def rig(aihc_client_factory) -> AsyncIterator[Rig]:  # type: ignore[no-untyped-def]
    async for r in aihc_client_factory(stale_after=24 * 3600):
        yield r


@pytest.fixture
def aihc_client_factory(aiohttp_client):  # type: ignore[no-untyped-def]
    async def make(stale_after: float) -> AsyncIterator[Rig]:
        simulator = Simulator(seed=3, aihc=AihcWorld.fixed(jobs=3, pods_per_job=2))
        simulator.faults.hang_seconds = 30
        async with running(simulator) as served:
            clock = SteppedClock()
            app = build_app(target(served.url, stale_after), clock=clock, sleep=clock.sleep)
            client = await aiohttp_client(app)
            await until_ready(client)
            runner = app[STATE].scheduler.runners[0]
            await quiet([runner], clock)
            yield Rig(client, simulator.faults, runner, clock)

    return make


def inject(faults: Faults, fault: int | str) -> None:
    faults.only = frozenset({METRICS})
    if isinstance(fault, int):
        faults.error_rates = {fault: 1.0}
        faults.retry_after = "1" if fault == 429 else None
    else:
        setattr(
            faults,
            {
                "reset": "reset_rate",
                "hang": "hang_rate",
                "html": "html_error_rate",
                "malformed": "malformed_rate",
                "wrong_types": "wrong_types_rate",
            }[fault],
            1.0,
        )


def clear(faults: Faults) -> None:
    fresh = Faults(hang_seconds=faults.hang_seconds)
    for name in (
        "error_rates",
        "retry_after",
        "reset_rate",
        "hang_rate",
        "html_error_rate",
        "malformed_rate",
        "wrong_types_rate",
        "only",
    ):
        setattr(faults, name, getattr(fresh, name))


FAULTS = [
    (403, "403"),
    (429, "429"),
    (500, "500"),
    ("reset", "error"),
    ("hang", "timeout"),
    ("malformed", "error"),
    ("html", "502"),
    ("wrong_types", "error"),
]


@pytest.mark.parametrize(("fault", "code"), FAULTS, ids=[str(f) for f, _ in FAULTS])
async def test_fault(rig: Rig, fault: int | str, code: str) -> None:
    # One scrape after each poll: every value of a state is read from it.
    up = {"provider": "aihc", "target": "pool"}
    requests = {"provider": "aihc", "endpoint": METRICS, "code": code}
    retries = {"provider": "aihc", "endpoint": METRICS}
    found = await rig.scrape()
    assert value(found, "training_exporter_up", **up) == 1
    before = {tuple(sorted(labels.items())): v for labels, v in found[GPU]}
    assert before
    counted = value(found, "training_exporter_api_requests_total", **requests) or 0

    inject(rig.faults, fault)
    started = time.monotonic()
    await rig.poll()
    took = time.monotonic() - started

    found = await rig.scrape()
    assert value(found, "training_exporter_up", **up) == 0
    assert (value(found, "training_exporter_api_requests_total", **requests) or 0) > counted
    kept = {tuple(sorted(labels.items())): v for labels, v in found[GPU]}
    assert kept == before, "the last good data must stay for stale_after"
    assert value(found, "training_job_status", status="Running") == 1
    if fault == 429:
        assert took >= 1.0, "Retry-After: 1 was not honoured"
        assert (value(found, "training_exporter_api_retries_total", **retries) or 0) >= 1
    if fault == 403:
        assert (value(found, "training_exporter_api_retries_total", **retries) or 0) == 0

    clear(rig.faults)
    await rig.poll()
    found = await rig.scrape()
    assert value(found, "training_exporter_up", **up) == 1
    assert value(found, "training_exporter_last_success_timestamp_seconds", **up)


async def test_last_good_data_goes_after_stale_after(aihc_client_factory) -> None:  # type: ignore[no-untyped-def]
    # A poll moves the clock on by 16 x POLL (960 s): the GPU series' last good read is 960 s
    # old after the first failed poll, 1,920 s after the second.
    async for rig in aihc_client_factory(stale_after=1500):
        assert (await rig.scrape())[GPU]
        inject(rig.faults, 500)
        await rig.poll()
        assert (await rig.scrape())[GPU], "kept while younger than stale_after"
        await rig.poll()
        found = await rig.scrape()
        assert GPU not in found, "resource series must go once older than stale_after"
        # CpuUsage is a medium-tier type: its bound is 5 x the fast one's, so it outlives
        # GPU utilisation's (its 3 parts are served stale).
        assert len(found["training_pod_cpu_utilization_ratio"]) == 6
        assert value(found, "training_exporter_stale_parts", target="pool") == 3
        # The job list still answers: status series stay.
        assert any(v == 1 for _, v in found["training_job_status"])


async def test_the_process_keeps_serving_while_every_call_fails(rig: Rig) -> None:
    rig.faults.only = None
    rig.faults.error_rates = {503: 1.0}
    await rig.poll()
    resp = await rig.client.get("/-/healthy")
    assert resp.status == 200
    found = await rig.scrape()
    assert value(found, "training_exporter_up", provider="aihc", target="pool") == 0
    # Nothing could be listed: the jobs are carried under the staleness rule, not dropped.
    assert found[GPU]
