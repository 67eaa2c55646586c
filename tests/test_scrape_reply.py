"""The metrics reply: written in slices of the cached bytes (whole, exact, HEAD-safe), from a
cache that stays small whatever content types clients ask for."""

from __future__ import annotations

import gzip
from typing import Any

import aiohttp
from aiohttp.test_utils import TestClient

from bench import synthetic
from bench.serve import SyntheticProvider
from exporter.config import Settings
from exporter.server import STATE, PayloadBody, build_app


async def served_pool(aiohttp_client, series: int) -> TestClient[Any, Any]:  # type: ignore[no-untyped-def]
    providers = [SyntheticProvider(t, seed=3) for t in synthetic.plan(series, seed=3)]
    app = build_app(Settings(poll_interval=3600), providers=providers)  # type: ignore[arg-type]
    client: TestClient[Any, Any] = await aiohttp_client(app)
    scheduler = app[STATE].scheduler
    assert scheduler is not None
    await scheduler.wait_ready(30)
    return client


async def test_large_reply_is_whole_in_both_encodings(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    client = await served_pool(aiohttp_client, 8000)
    state = client.app[STATE]
    data, _ = state.exposition.render_view(state.store.view(), "text/plain;version=0.0.4")
    assert len(data) > 4 * PayloadBody.SLICE
    url = client.make_url("/metrics")
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.get(url, headers={"Accept-Encoding": "identity"}) as plain:
            body = await plain.read()
            assert int(plain.headers["Content-Length"]) == len(body)
        async with session.get(url, headers={"Accept-Encoding": "gzip"}) as zipped:
            raw = await zipped.read()
            assert int(zipped.headers["Content-Length"]) == len(raw)
    assert body.startswith(data)
    assert body[len(data) :].startswith(b"# HELP training_exporter_")
    assert gzip.decompress(raw).startswith(data)


async def test_head_has_length_and_no_body(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    client = await served_pool(aiohttp_client, 2000)
    plain = {"Accept-Encoding": "identity"}
    full = await (await client.get("/metrics", headers=plain)).read()
    head = await client.head("/metrics", headers=plain)
    assert head.status == 200
    assert await head.read() == b""
    # The self-metrics may grow between the two requests, never shrink.
    assert int(head.headers["Content-Length"]) >= len(full) - 200


async def test_renderings_cached_stay_few_whatever_clients_ask(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    client = await served_pool(aiohttp_client, 500)
    exposition = client.app[STATE].exposition
    for minor in range(10):
        accept = f"application/openmetrics-text; version=1.{minor}.0"
        resp = await client.get("/metrics", headers={"Accept": accept})
        assert resp.headers["Content-Type"].startswith(
            f"application/openmetrics-text; version=1.{minor}.0"
        )
        assert (await resp.read()).endswith(b"# EOF\n")
    assert exposition.renders == 10
    assert exposition.cached_renderings == 4
    # The most recent ones are the ones kept.
    await client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.9.0"})
    assert exposition.renders == 10


async def test_formats_share_lines_and_a_poll_drops_them(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    client = await served_pool(aiohttp_client, 2000)
    state = client.app[STATE]
    plain = {"Accept-Encoding": "identity"}
    for _ in range(2):
        view = state.store.view()
        for accept in ("text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"):
            resp = await client.get("/metrics", headers={**plain, "Accept": accept})
            expected, _ = state.exposition.render_view(view, accept)
            assert (await resp.read()).startswith(expected.removesuffix(b"# EOF\n"))
        assert state.exposition.cached_renderings == 2
        scheduler = state.scheduler
        assert scheduler is not None
        await scheduler.runners[0].poll_once()
        # The swap made both renderings stale: nothing of them is kept.
        assert state.exposition.cached_renderings == 0
    assert state.exposition.renders == 4


async def test_no_created_series_in_either_format(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    client = await served_pool(aiohttp_client, 200)
    for accept in ("text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"):
        body = await (await client.get("/metrics", headers={"Accept": accept})).text()
        names = {line.split("{")[0].split(" ")[0] for line in body.splitlines() if line[:1] != "#"}
        assert not [name for name in names if name.endswith("_created")], accept
        # The counters and histograms themselves are all there.
        assert "training_exporter_poll_overruns_total" in names
        assert "training_exporter_poll_duration_seconds_count" in names
        assert "training_exporter_poll_duration_seconds_bucket" in names
