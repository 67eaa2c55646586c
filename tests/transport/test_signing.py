"""A request is signed when it is written, after its wait for a budget slot: AIHC's
`x-bce-date` and Alaya's signed milliseconds are each within a second of the request's arrival,
however long it waited. At 2 requests a second, the fifth of five calls made at once waits 2 s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime

import pytest
from aiohttp import web
from pydantic import SecretStr

from exporter.config import Limits
from exporter.providers.aihc.client import AihcClient
from exporter.providers.alaya.client import AccessKeys, AlayaClient
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator
from exporter.simulator.alaya import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, LIST_PATH
from tests.target_helpers import TEST_POOL, aihc_target, alaya_target

CALLS = 5
SLOW = Limits(requests_per_second=2, max_concurrency=CALLS, retries=0, timeout=30)


def signed_at(request: web.Request) -> float | None:
    """When the request says it was signed (unix seconds)."""
    if request.path == LIST_PATH:
        return int(request.headers["Authorization"].split(":")[1]) / 1000
    date = request.headers.get("x-bce-date")
    if date is None:
        return None
    return datetime.strptime(date, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


@pytest.fixture
async def served() -> AsyncIterator[tuple[Simulator, str, list[tuple[str, float]]]]:
    """The simulator, and each request's (path, arrival minus signature time)."""
    simulator = Simulator(seed=5)
    gaps: list[tuple[str, float]] = []

    @web.middleware
    async def note(request: web.Request, handler: Callable[..., Awaitable[web.StreamResponse]]):  # type: ignore[no-untyped-def]
        at = signed_at(request)
        if at is not None:
            gaps.append((request.path, time.time() - at))
        return await handler(request)

    app = simulator.app()
    app.middlewares.insert(0, note)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield simulator, f"http://127.0.0.1:{runner.addresses[0][1]}", gaps
    finally:
        await runner.cleanup()


async def test_each_request_is_signed_after_its_wait_for_the_budget(
    served: tuple[Simulator, str, list[tuple[str, float]]],
) -> None:
    simulator, url, gaps = served
    metrics = SelfMetrics()
    aihc = AihcClient(aihc_target(url, resource_pool_id=TEST_POOL, limits=SLOW), metrics)
    alaya = AlayaClient(alaya_target(url, simulator, limits=SLOW), metrics)
    keys = AccessKeys(SecretStr(DEMO_ACCESS_KEY_ID), SecretStr(DEMO_SECRET_ACCESS_KEY))
    deadline = time.monotonic() + 60
    try:
        await asyncio.gather(
            *(aihc.describe_jobs(None, 1, 10, deadline) for _ in range(CALLS)),
            *(alaya.job_list_page(keys, 1, 10, deadline) for _ in range(CALLS)),
            return_exceptions=True,
        )
    finally:
        await aihc.close()
        await alaya.close()
    by_path = {path: max(g for p, g in gaps if p == path) for path, _ in gaps}
    print({path: round(gap, 2) for path, gap in by_path.items()})
    assert sorted(by_path) == ["/", LIST_PATH]
    assert len(gaps) == 2 * CALLS
    # x-bce-date is whole seconds (its second may have begun a second before arrival).
    assert by_path["/"] < 1.5 and by_path[LIST_PATH] < 0.5, by_path
