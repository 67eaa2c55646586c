"""The metrics reply: written in slices of the cached bytes (whole, exact, HEAD-safe), from two
immutable renderings (text 0.0.4, OpenMetrics 1.0.0) made once per store change, whatever
content types clients ask for and however many scrape at once."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient

from bench import synthetic
from bench.serve import SyntheticProvider
from exporter import gzipjoin
from exporter.collector import Payload, SnapshotCollector, negotiate
from exporter.config import Settings
from exporter.model import TargetSnapshot
from exporter.rendering import Chunk, Families, Renderer
from exporter.server import STATE, PayloadBody
from exporter.store import StoreView
from tests.runner_helpers import poll_app, stepped_app
from tests.scrape_helpers import HeldRenders, Renders
from tests.scrape_helpers import rendered as store_rendered

# Where a scrape's own self-metrics begin, after the cached rendering of the store.
SELF = b"# HELP training_exporter_"


async def served_pool(aiohttp_client, series: int) -> TestClient[Any, Any]:  # type: ignore[no-untyped-def]
    providers = [SyntheticProvider(t, seed=3) for t in synthetic.plan(series, seed=3)]
    app = stepped_app(Settings(poll_interval=3600), providers=providers)
    client: TestClient[Any, Any] = await aiohttp_client(app)
    scheduler = app[STATE].scheduler
    assert scheduler is not None
    await scheduler.wait_ready(30)
    await store_rendered(app)
    return client


def rendered(view: StoreView, accept: str) -> bytes:
    """The job and pod series of `view` as prometheus-client's own encoder writes them."""
    families = SnapshotCollector(lambda: view).collect(view)
    return negotiate(accept).encoder(Families(*families))


async def test_large_reply_is_whole_in_both_encodings(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    client = await served_pool(aiohttp_client, 8000)
    state = client.app[STATE]
    data = rendered(state.store.view(), "text/plain;version=0.0.4")
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


async def test_a_scrape_during_a_render_gets_the_last_complete_one_at_once(
    aiohttp_client,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What Prometheus sees while a change of the store is rendered: the rendering before it,
    whole and without waiting for the one under way; then, once that is done, the change."""
    client = await served_pool(aiohttp_client, 200)
    state = client.app[STATE]
    plain = {"Accept-Encoding": "identity"}
    before = await (await client.get("/metrics", headers=plain)).read()
    assert b"training_job_info{" in before
    snapshots = list(state.store.view().snapshots.values())
    # The render of the change starts and waits in its thread until released.
    held = HeldRenders(monkeypatch)
    try:
        for snapshot in snapshots:  # every target's jobs go
            state.store.swap(TargetSnapshot.empty(snapshot.provider, snapshot.target))
        reply = await asyncio.wait_for(client.get("/metrics", headers=plain), 10)
        assert reply.status == 200
        during = await reply.read()
        assert not await state.exposition.holds(state.store.view().version, 0.05)
    finally:
        held.release()
    # Everything before the self-metrics (a scrape's own, appended) is the rendering before.
    assert during.partition(SELF)[0] == before.partition(SELF)[0]
    assert SELF in during and during.endswith(b"\n")
    await store_rendered(client.app)
    after = await (await client.get("/metrics", headers=plain)).read()
    assert b"training_job_info{" not in after and SELF in after


async def test_replies_above_the_text_limit_are_inflated_as_written(
    aiohttp_client,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Above the text limit (here 0 bytes) the chunks keep their deflate alone: identity
    replies in both formats are the same text, inflated chunk by chunk as they are written,
    while polls change the store and renders let the chunks' text go under the scrapes."""
    renderer = SnapshotCollector.renderer

    def textless(self: SnapshotCollector, *args: Any, **kwargs: Any) -> Renderer:
        return renderer(self, *args, **{**kwargs, "text_limit": 0})

    monkeypatch.setattr(SnapshotCollector, "renderer", textless)
    client = await served_pool(aiohttp_client, 8000)
    state = client.app[STATE]
    payload = await state.exposition.payload("", False)
    chunks = [part for part in payload.parts if isinstance(part, Chunk)]
    assert len(chunks) > 10 and all(chunk.data is None for chunk in chunks)
    for accept in ("text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"):
        view = state.store.view()
        expected = rendered(view, accept).removesuffix(b"# EOF\n")
        for encoding in ("identity", "gzip"):
            headers = {"Accept": accept, "Accept-Encoding": encoding}
            body = await (await client.get("/metrics", headers=headers)).read()
            assert body.startswith(expected + SELF)

    async def scrape(accept: str) -> None:
        resp = await client.get(
            "/metrics", headers={"Accept": accept, "Accept-Encoding": "identity"}
        )
        body = await resp.read()
        assert resp.status == 200 and int(resp.headers["Content-Length"]) == len(body)
        assert body.endswith(b"# EOF\n") == accept.startswith("application/openmetrics")

    async def poll() -> None:
        for _ in range(4):
            await poll_app(client.app)
            await asyncio.sleep(0.01)

    accepts = ("text/plain", "application/openmetrics-text; version=1.0.0") * 6
    await asyncio.gather(poll(), *(scrape(accept) for accept in accepts))


async def test_head_has_length_and_no_body(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    client = await served_pool(aiohttp_client, 2000)
    plain = {"Accept-Encoding": "identity"}
    full = await (await client.get("/metrics", headers=plain)).read()
    head = await client.head("/metrics", headers=plain)
    assert head.status == 200
    assert await head.read() == b""
    # The self-metrics may grow between the two requests, never shrink.
    assert int(head.headers["Content-Length"]) >= len(full) - 200


async def test_two_formats_scraped_while_the_store_changes_never_fail(
    aiohttp_client,  # type: ignore[no-untyped-def]
) -> None:
    """Clients that make up OpenMetrics versions, scraping both formats at once while polls
    change the store: every reply is whole and in one of the two formats. (Before, each version
    was a content type of its own, renders of two ran at once on shared caches, and the 17th
    cleared them under the others: 500s.)"""
    client = await served_pool(aiohttp_client, 3000)
    statuses: list[int] = []

    async def scrape(minor: int) -> None:
        om = minor % 2 == 0
        accept = f"application/openmetrics-text; version=1.{minor}.0" if om else "text/plain"
        resp = await client.get("/metrics", headers={"Accept": accept})
        statuses.append(resp.status)
        body = await resp.read()
        if resp.status == 200:
            wanted = "application/openmetrics-text; version=1.0.0" if om else "text/plain"
            assert resp.headers["Content-Type"].startswith(wanted)
            assert body.endswith(b"# EOF\n") == om

    async def poll() -> None:
        for _ in range(6):
            await poll_app(client.app)
            await asyncio.sleep(0.01)

    await asyncio.gather(poll(), *(scrape(minor) for minor in range(60)))
    assert statuses == [200] * 60


async def test_a_change_renders_both_formats_once_whoever_scrapes(
    aiohttp_client,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = await served_pool(aiohttp_client, 2000)
    state = client.app[STATE]
    plain = {"Accept-Encoding": "identity"}
    renders = Renders(monkeypatch)
    for _ in range(2):
        view = state.store.view()
        for accept in ("text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"):
            for encoding in ("identity", "gzip"):
                headers = {"Accept-Encoding": encoding, "Accept": accept}
                resp = await client.get("/metrics", headers=headers)
                assert resp.status == 200
            resp = await client.get("/metrics", headers={**plain, "Accept": accept})
            expected = rendered(view, accept)
            assert (await resp.read()).startswith(expected.removesuffix(b"# EOF\n"))
        assert renders.count == 0
        await poll_app(client.app)
        await store_rendered(client.app)
        # At most once per store version (a poll may swap more than once), and not again.
        assert 1 <= renders.count <= state.store.view().version - view.version
        renders.count = 0


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


async def test_a_long_reply_lets_the_loop_run_others_between_its_turns() -> None:
    """A client that never makes the writer wait (each write returns at once) does not keep
    the loop: the write yields after each TURN bytes, and a reply under TURN never does,
    unless it is inflated from a chunk's deflate as it is written."""
    written: list[int] = []

    class Eager:
        async def write(self, piece: bytes | memoryview) -> None:
            written.append(len(piece))

    turns = 0

    async def others() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    running = asyncio.create_task(others())
    await asyncio.sleep(0)
    counted = []
    for size in (PayloadBody.TURN // 2, 10 * PayloadBody.TURN):
        before = turns
        await PayloadBody(Payload((b"x" * size,), "text/plain", False)).write(Eager())  # type: ignore[arg-type]
        counted.append(turns - before)
    # Half a turn's text inflated from a chunk counts INFLATED times: the write yields once.
    text = b"x" * (PayloadBody.TURN // 2)
    piece = gzipjoin.deflate(text, 1)
    chunk = Chunk((), None, piece.raw, piece.length, piece.crc, (), (), ())
    before = turns
    await PayloadBody(Payload((chunk,), "text/plain", False)).write(Eager())  # type: ignore[arg-type]
    counted.append(turns - before)
    running.cancel()
    assert sum(written) == PayloadBody.TURN + 10 * PayloadBody.TURN
    assert counted == [0, 10, 1]
