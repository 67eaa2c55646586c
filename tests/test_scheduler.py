"""The scheduler and its runners: rounds never overlap, a queue that falls behind is counted,
stop cancels in-flight calls and closes sessions, and a provider bug is contained."""

from __future__ import annotations

import asyncio
import gc
import random
import time
import warnings

from aiohttp import web
from aiohttp.test_utils import TestServer

from exporter.config import Limits
from exporter.model import JOB_LABELS, Sample
from exporter.providers.base import Listing, PollContext, ReadContext, ReadResult, Unit
from exporter.scheduler import Scheduler
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.core import Faults, RequestLog, fault_middleware
from exporter.status import CallLog
from exporter.store import SnapshotStore
from exporter.transport.gate import Gate
from exporter.transport.iface import PreparedRequest
from exporter.transport.limited import LimitedClient
from exporter.work.runner import TargetRunner
from exporter.work.tiers import resolve


class HttpProvider:
    """One job with `items` fast-tier items; each read is one request to `url`."""

    provider = "aihc"
    target = "t"

    def __init__(self, url: str, metrics: SelfMetrics, interval: float, items: int = 1) -> None:
        self.url = url
        self.items = tuple(f"GpuUsage{i}" for i in range(items))
        self.tiers = resolve("aihc", self.items, interval, {}, dict.fromkeys(self.items, "fast"))
        self.client = LimitedClient("aihc", "t", Limits(timeout=30), metrics)
        self.gate: Gate = self.client.gate
        self.call_log = self.client.call_log
        self.listings = 0
        self.active = 0

    async def list_jobs(self, context: PollContext) -> Listing:
        self.listings += 1
        sample = Sample("training_job_replicas", JOB_LABELS, ("aihc", "p", "q", "j"), 1.0)
        return Listing(
            parts={"j": frozenset({"job", *self.items})},
            readings={"j": {"job": (sample,)}},
            units=[Unit("j", "j", self.items)],
        )

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        self.active += 1
        try:
            req = PreparedRequest("GET", self.url)
            await self.client.fetch("x", lambda: req, lambda r: r, deadline=context.deadline)
            return ReadResult("j", {item: ()})
        finally:
            self.active -= 1

    async def close(self) -> None:
        await self.client.close()

    def describe(self) -> dict[str, str]:
        return {}


async def upstream(aiohttp_server, faults: Faults) -> TestServer:  # type: ignore[no-untyped-def]
    async def ok(request: web.Request) -> web.Response:
        return web.json_response({})

    app = web.Application(middlewares=[fault_middleware(faults, RequestLog(), random.Random(1))])
    app.router.add_get("/x", ok)
    server: TestServer = await aiohttp_server(app)
    return server


def connections(server: TestServer) -> int:
    """The upstream's open connections, as its server counts them."""
    assert server.runner is not None and server.runner.server is not None
    return len(server.runner.server.connections)


def value(metrics: SelfMetrics, name: str) -> float:
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == name:
                return float(s.value)
    raise KeyError(name)


def runner(provider: object, metrics: SelfMetrics, workers: int = 1) -> TargetRunner:
    return TargetRunner(provider, SnapshotStore(), metrics, budget=None, workers=workers)  # type: ignore[arg-type]


async def test_a_queue_that_falls_behind_is_counted_and_rounds_never_overlap(
    aiohttp_server,
) -> None:  # type: ignore[no-untyped-def]
    # Each read takes 0.3 s, one worker, the item is due every 0.1 s: the queue falls behind
    # (a call waits 0.2 s for the worker, counted in the rounds that take one).
    url = str((await upstream(aiohttp_server, Faults(latency=0.3))).make_url("/x"))
    metrics = SelfMetrics()
    provider = HttpProvider(url, metrics, interval=0.1)
    run = runner(provider, metrics)
    scheduler = Scheduler([run])
    scheduler.start()
    started = time.monotonic()
    while provider.listings < 10 and time.monotonic() - started < 10:
        await asyncio.sleep(0.05)
    await scheduler.stop()
    assert provider.listings >= 10
    assert provider.listings == value(metrics, "training_exporter_poll_duration_seconds_count")
    assert value(metrics, "training_exporter_poll_overruns_total") >= 3


async def test_stop_cancels_in_flight_calls_and_closes_sessions(aiohttp_server) -> None:  # type: ignore[no-untyped-def]
    server = await upstream(aiohttp_server, Faults(latency=30))
    metrics = SelfMetrics()
    provider = HttpProvider(str(server.make_url("/x")), metrics, interval=60, items=4)
    scheduler = Scheduler([runner(provider, metrics, workers=4)])
    scheduler.start()
    # The calls wait in the client's pool for its connections: some are on the wire, once the
    # upstream has accepted them (a call counts itself active before its connection is made).
    for _ in range(100):
        if provider.active == 4 and connections(server) >= 1:
            break
        await asyncio.sleep(0.02)
    assert provider.active == 4 and connections(server) >= 1
    started = time.monotonic()
    await scheduler.stop()
    assert time.monotonic() - started < 2
    assert provider.active == 0
    # On the wire: every connection closed.
    for _ in range(100):
        if connections(server) == 0:
            break
        await asyncio.sleep(0.02)
    assert connections(server) == 0
    # And the session itself: aiohttp warns of a client session collected unclosed.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del scheduler, provider
        gc.collect()
    assert not [w for w in caught if "Unclosed client session" in str(w.message)]


class BrokenProvider:
    provider = "alaya"
    target = "broken"
    tiers = resolve("alaya", (), 0.05, {}, {})
    gate = Gate()
    call_log = CallLog()
    listings = 0

    async def list_jobs(self, context: PollContext) -> Listing:
        self.listings += 1
        raise RuntimeError("a bug in a provider")

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        raise AssertionError("no units, no reads")

    async def close(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {}


async def test_provider_bug_marks_target_down_and_loop_goes_on() -> None:
    metrics = SelfMetrics()
    provider = BrokenProvider()
    scheduler = Scheduler([runner(provider, metrics)])
    scheduler.start()
    assert await scheduler.wait_ready(5)
    while provider.listings < 3:
        await asyncio.sleep(0.02)
    await scheduler.stop()
    assert value(metrics, "training_exporter_up") == 0
