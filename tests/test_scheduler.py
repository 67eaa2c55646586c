"""The scheduler: no overlapping polls, counted overruns, clean shutdown, contained bugs."""

from __future__ import annotations

import asyncio
import random
import time

from aiohttp import web

from exporter.api import ApiClient, PreparedRequest
from exporter.config import Limits
from exporter.model import JOB_LABELS, PollResult, Sample
from exporter.providers.base import PollContext
from exporter.scheduler import Scheduler, TargetPoller
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.core import Faults, RequestLog, fault_middleware
from exporter.store import SnapshotStore


class HttpProvider:
    """Makes `calls` requests to `url` per poll through a real ApiClient."""

    provider = "aihc"

    def __init__(self, url: str, metrics: SelfMetrics, calls: int = 1) -> None:
        self.target = "t"
        self.url = url
        self.calls = calls
        self.client = ApiClient("aihc", "t", Limits(timeout=30), metrics)
        self.active = 0
        self.max_active = 0

    async def poll(self, context: PollContext) -> PollResult:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            req = PreparedRequest("GET", self.url)
            await asyncio.gather(
                *(
                    self.client.call("x", lambda: req, deadline=context.deadline)
                    for _ in range(self.calls)
                )
            )
            result = PollResult()
            result.put(
                "j",
                "job",
                (Sample("training_job_replicas", JOB_LABELS, ("aihc", "p", "q", "j"), 1.0),),
            )
            return result
        finally:
            self.active -= 1

    async def close(self) -> None:
        await self.client.close()

    def describe(self) -> dict[str, str]:
        return {}


async def upstream(aiohttp_server, faults: Faults) -> str:  # type: ignore[no-untyped-def]
    async def ok(request: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application(middlewares=[fault_middleware(faults, RequestLog(), random.Random(1))])
    app.router.add_get("/x", ok)
    server = await aiohttp_server(app)
    return str(server.make_url("/x"))


def value(metrics: SelfMetrics, name: str) -> float:
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == name:
                return float(s.value)
    raise KeyError(name)


async def test_overrun_is_counted_and_polls_never_overlap(aiohttp_server) -> None:  # type: ignore[no-untyped-def]
    url = await upstream(aiohttp_server, Faults(latency=0.3))
    metrics = SelfMetrics()
    provider = HttpProvider(url, metrics)
    poller = TargetPoller(provider, SnapshotStore(), metrics, poll_interval=0.1, stale_after=1)
    scheduler = Scheduler([poller])
    scheduler.start()
    started = time.monotonic()
    while poller.polls < 3 and time.monotonic() - started < 10:
        await asyncio.sleep(0.05)
    await scheduler.stop()
    assert poller.polls >= 3
    assert provider.max_active == 1
    assert value(metrics, "training_exporter_poll_overruns_total") >= 3


async def test_stop_cancels_in_flight_calls_and_closes_sessions(aiohttp_server) -> None:  # type: ignore[no-untyped-def]
    url = await upstream(aiohttp_server, Faults(latency=30))
    metrics = SelfMetrics()
    provider = HttpProvider(url, metrics, calls=4)
    scheduler = Scheduler(
        [TargetPoller(provider, SnapshotStore(), metrics, poll_interval=60, stale_after=180)]
    )
    scheduler.start()
    await asyncio.sleep(0.3)
    assert provider.active == 1
    started = time.monotonic()
    await scheduler.stop()
    assert time.monotonic() - started < 2
    assert provider.client._session is None


class BrokenProvider:
    provider = "alaya"
    target = "broken"

    async def poll(self, context: PollContext) -> PollResult:
        raise RuntimeError("a bug in a provider")

    async def close(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {}


async def test_provider_bug_marks_target_down_and_loop_goes_on() -> None:
    metrics = SelfMetrics()
    poller = TargetPoller(BrokenProvider(), SnapshotStore(), metrics, 0.05, 1)
    scheduler = Scheduler([poller])
    scheduler.start()
    assert await scheduler.wait_ready(5)
    while poller.polls < 3:
        await asyncio.sleep(0.02)
    await scheduler.stop()
    assert value(metrics, "training_exporter_up") == 0
