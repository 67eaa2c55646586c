"""LimitedClient against a real HTTP server with the simulator's fault middleware in front."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from exporter.config import Limits
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.core import Faults, RequestLog, fault_middleware
from exporter.transport.iface import (
    ApiError,
    ApiResponse,
    CallDropped,
    CallSkipped,
    PreparedRequest,
)
from exporter.transport.limited import LimitedClient, retry_after_seconds


class Upstream:
    def __init__(self, server: TestServer, faults: Faults, log: RequestLog) -> None:
        self.server, self.faults, self.log = server, faults, log

    def request(self) -> PreparedRequest:
        return PreparedRequest("GET", str(self.server.make_url("/v1/thing")))


@pytest.fixture
async def upstream(aiohttp_server) -> AsyncIterator[Upstream]:  # type: ignore[no-untyped-def]
    faults, log = Faults(hang_seconds=5), RequestLog()

    async def thing(request: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    app = web.Application(middlewares=[fault_middleware(faults, log, random.Random(1))])
    app.router.add_get("/v1/thing", thing)
    app.router.add_post("/v1/thing", thing)
    server = await aiohttp_server(app)
    yield Upstream(server, faults, log)


async def call(client: LimitedClient, endpoint: str, prepare, **options) -> ApiResponse:  # type: ignore[no-untyped-def]
    """The whole reply of one call."""
    return await client.fetch(endpoint, prepare, lambda response: response, **options)


def counts(metrics: SelfMetrics, name: str) -> dict[tuple[str, ...], float]:
    found = {}
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == name:
                found[tuple(s.labels.values())] = s.value
    return found


async def make_client(**limits: object) -> tuple[LimitedClient, SelfMetrics]:
    metrics = SelfMetrics()
    sleeps: list[float] = []

    async def fast_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        await asyncio.sleep(min(seconds, 0.01))

    client = LimitedClient("aihc", "t", Limits(**limits), metrics, sleep=fast_sleep)  # type: ignore[arg-type]
    client.sleeps = sleeps  # type: ignore[attr-defined]
    return client, metrics


async def test_retries_a_500_then_succeeds(upstream: Upstream) -> None:
    client, metrics = await make_client(retries=3)
    upstream.faults.script.extend([500, 503])
    try:
        response = await call(client, "thing", upstream.request)
    finally:
        await client.close()
    assert response.json() == {"ok": True}
    requests = counts(metrics, "training_exporter_api_requests_total")
    assert requests == {
        ("aihc", "t", "thing", "500"): 1,
        ("aihc", "t", "thing", "503"): 1,
        ("aihc", "t", "thing", "200"): 1,
    }
    assert counts(metrics, "training_exporter_api_retries_total") == {("aihc", "thing"): 2}


async def test_retry_after_is_honoured(upstream: Upstream) -> None:
    client, _ = await make_client(retries=2)
    upstream.faults.retry_after = "1"
    upstream.faults.script.append(429)
    try:
        await call(client, "thing", upstream.request)
    finally:
        await client.close()
    # The retry's own wait, then the gate's for what is left of the pause (the clock is real).
    assert client.sleeps[0] == 1.0  # type: ignore[attr-defined]
    first, second = (e.at for e in upstream.log.entries)
    assert second - first >= 0.95


def test_retry_after_http_date() -> None:
    when = email.utils.formatdate(1_000_030, usegmt=True)
    assert retry_after_seconds(when, now=1_000_000) == 30
    assert retry_after_seconds("nonsense") is None
    assert retry_after_seconds("-5") == 0


async def test_403_is_not_retried(upstream: Upstream) -> None:
    client, metrics = await make_client(retries=5)
    upstream.faults.script.append(403)
    with pytest.raises(ApiError) as info:
        await call(client, "thing", upstream.request)
    await client.close()
    assert info.value.auth and info.value.code == "403"
    assert upstream.log.count() == 1
    assert counts(metrics, "training_exporter_api_retries_total") == {}


async def test_a_bad_request_keeps_its_code_and_an_unknown_one_is_other(
    upstream: Upstream,
) -> None:
    client, metrics = await make_client(retries=0)
    upstream.faults.script.extend([400, 418])
    for _ in range(2):
        with pytest.raises(ApiError):
            await call(client, "thing", upstream.request)
    await client.close()
    assert counts(metrics, "training_exporter_api_requests_total") == {
        ("aihc", "t", "thing", "400"): 1,
        ("aihc", "t", "thing", "other"): 1,
    }


@pytest.mark.parametrize(("fault", "stopped"), [(429, CallDropped), (403, CallSkipped)])
async def test_a_call_waiting_for_its_slot_is_stopped_by_a_pause_or_refusal(
    upstream: Upstream, fault: int, stopped: type[Exception]
) -> None:
    """At 1 request/s the second call waits a second for its slot; the first one's Retry-After
    (or refused credentials) closes the gate meanwhile, and the second never reaches the
    provider: the gate is passed as the request is written. Paused past its deadline, it is
    dropped (and counted so); refused, it is skipped."""
    client, metrics = await make_client(retries=0, requests_per_second=1, max_concurrency=2)
    upstream.faults.retry_after = "60"
    upstream.faults.script.append(fault)
    deadline = time.monotonic() + 5
    try:
        first, second = await asyncio.gather(
            call(client, "thing", upstream.request, deadline=deadline),
            call(client, "thing", upstream.request, deadline=deadline),
            return_exceptions=True,
        )
    finally:
        await client.close()
    assert isinstance(first, ApiError) and first.code == str(fault)
    assert isinstance(second, stopped)
    assert upstream.log.count() == 1
    assert client.gate.sent == 1
    dropped = counts(metrics, "training_exporter_api_calls_dropped_total")
    assert dropped == ({("aihc", "t", "thing"): 1} if fault == 429 else {})


async def test_gives_up_after_retries(upstream: Upstream) -> None:
    client, _ = await make_client(retries=2)
    upstream.faults.script.extend([500, 500, 500, 500])
    with pytest.raises(ApiError, match="500"):
        await call(client, "thing", upstream.request)
    await client.close()
    assert upstream.log.count() == 3


async def test_timeout_and_reset_are_counted(upstream: Upstream) -> None:
    client, metrics = await make_client(retries=0, timeout=0.3)
    # The transport itself resends an idempotent request once when its connection drops
    # before any reply.
    upstream.faults.script.extend(["hang", "reset", "reset"])
    try:
        for expected in ("timeout", "error"):
            with pytest.raises(ApiError) as info:
                await call(client, "thing", upstream.request)
            assert info.value.code == expected
    finally:
        await client.close()
    requests = counts(metrics, "training_exporter_api_requests_total")
    assert requests == {("aihc", "t", "thing", "timeout"): 1, ("aihc", "t", "thing", "error"): 1}


@pytest.mark.parametrize(("method", "written"), [("GET", 2), ("POST", 1)])
async def test_writes_the_transport_resends_are_counted(
    upstream: Upstream, method: str, written: int
) -> None:
    client, _ = await make_client(retries=0)
    url = str(upstream.server.make_url("/v1/thing"))
    upstream.faults.script.append("reset")
    try:
        response = await call(client, "thing", lambda: PreparedRequest(method, url, body=b"{}"))
    except ApiError as exc:
        response = None
        assert exc.code == "error"
    finally:
        await client.close()
    # The transport resends a GET on a new connection by itself, never a POST: every write the
    # upstream saw is one the budget counted.
    assert upstream.log.count() == written
    assert client.gate.sent == written
    assert (response is not None) == (method == "GET")


async def test_retries_stop_at_the_deadline(upstream: Upstream) -> None:
    client, _ = await make_client(retries=10)
    upstream.faults.retry_after = "60"
    upstream.faults.script.extend([429] * 5)
    with pytest.raises(ApiError, match="429"):
        await call(client, "thing", upstream.request, deadline=time.monotonic() + 5)
    await client.close()
    assert upstream.log.count() == 1


async def test_concurrency_cap(upstream: Upstream) -> None:
    client, _ = await make_client(max_concurrency=3, requests_per_second=0)
    upstream.faults.latency = 0.05
    try:
        await asyncio.gather(*(call(client, "thing", upstream.request) for _ in range(12)))
    finally:
        await client.close()
    # With at most 3 in flight and 50 ms each, the 4th arrival after any one is >= 50 ms later.
    times = sorted(e.at for e in upstream.log.entries)
    assert len(times) == 12
    for i in range(len(times) - 3):
        assert times[i + 3] - times[i] >= 0.045, times


async def test_each_request_is_prepared_when_its_turn_comes(upstream: Upstream) -> None:
    client, _ = await make_client(max_concurrency=1, requests_per_second=0)
    seen_before_prepare: list[int] = []

    def prepare() -> PreparedRequest:
        seen_before_prepare.append(upstream.log.count())
        return upstream.request()

    try:
        await asyncio.gather(*(call(client, "thing", prepare) for _ in range(5)))
    finally:
        await client.close()
    # One slot: each request is signed only after the one before it was answered.
    assert seen_before_prepare == [0, 1, 2, 3, 4]


async def test_rate_budget_spreads_requests(upstream: Upstream) -> None:
    client, _ = await make_client(max_concurrency=50, requests_per_second=20)
    await asyncio.gather(*(call(client, "thing", upstream.request) for _ in range(30)))
    await client.close()
    assert upstream.log.max_in_window(1.0) <= 21
