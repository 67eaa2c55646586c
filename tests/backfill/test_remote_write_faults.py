"""The backfill command against a fake store on a real socket that answers as each test says:
a 429 with Retry-After, a 400 to one batch, a window that keeps the oldest history back, a
Ctrl-C while a request is in flight. Each test counts the requests the store received, and
holds what it kept plus what the output file holds for promtool to exactly the file path's
samples for the same history (`file_path`, tests/backfill/conftest.py): nothing lost, nothing
twice."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from exporter.simulator import running
from tests.backfill.backfill_helpers import (
    FilePath,
    backfill,
    finish,
    options,
    start_backfill,
    write_config,
)
from tests.backfill.real_stores import Samples, promtool_blocks
from tests.backfill.remote_helpers import FakeStore, openmetrics_samples

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def count(samples: Samples) -> int:
    return sum(len(points) for points in samples.values())


def union(*parts: Samples) -> Samples:
    """The parts' samples together, each series' in time order (a sample twice stays twice)."""
    out: Samples = {}
    for part in parts:
        for labels, points in part.items():
            out.setdefault(labels, []).extend(points)
    return {labels: sorted(points) for labels, points in out.items()}


async def test_429_with_retry_after_is_waited_for_and_nothing_is_lost(
    file_path: FilePath, store: FakeStore, tmp_path: Path
) -> None:
    history_, expected = file_path.world, file_path.samples
    store.answer = lambda n, _: (429, "rate limited", {"Retry-After": "1"}) if n == 2 else None
    async with running(history_.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, history_)
        args = [*options(config, history_, "rest.om"), "--remote-write", store.url]
        run = await backfill(*args, cwd=tmp_path)
    assert run.code == 0, run.stderr
    # No probe answers: every sample is sent, none kept back.
    assert "every sample is sent" in run.stderr
    batches = len(store.requests) - 1
    assert store.requests[1].status == 429
    # The retry is the same batch, a second after the 429.
    assert store.requests[2].series == store.requests[1].series
    assert store.requests[2].at - store.requests[1].at >= 1.0
    assert f"sent in {batches} batches" in run.stderr and "retries: 1 after 429" in run.stderr
    assert union(store.kept) == expected
    assert not (tmp_path / "rest.om").exists()


async def test_a_400_to_one_batch_is_counted_kept_for_promtool_and_not_retried(
    file_path: FilePath, store: FakeStore, tmp_path: Path
) -> None:
    history_, expected = file_path.world, file_path.samples
    secret = "s3cr3t-tenant-token"
    (tmp_path / "token").write_text(secret + "\n")
    store.answer = lambda n, _: (400, f"out of bounds (token={secret})", {}) if n == 3 else None
    async with running(history_.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, history_)
        args = [
            *options(config, history_, "rest.om"),
            "--remote-write",
            store.url,
            "--remote-write.bearer-token-file",
            str(tmp_path / "token"),
        ]
        run = await backfill(*args, cwd=tmp_path)
        assert run.code == 0, run.stderr
        refused = store.requests[2]
        assert refused.status == 400
        # Not retried: every request carries another batch.
        bodies = [tuple(map(repr, r.series)) for r in store.requests]
        assert len(set(bodies)) == len(bodies)
        rest = openmetrics_samples((tmp_path / "rest.om").read_text())
        assert count(rest) == refused.samples
        assert (
            f"the store refused {refused.samples} samples (1 batches) as too_old: "
            "out of bounds (token=[REDACTED]" in run.stderr
        )
        assert secret not in run.stderr
        assert union(store.kept, rest) == expected
        assert all(r.headers["Authorization"] == f"Bearer {secret}" for r in store.requests)

        sent = len(store.requests)
        again = await backfill(*args, cwd=tmp_path)
        assert again.code == 0, again.stderr
        assert len(store.requests) == sent
        assert openmetrics_samples((tmp_path / "rest.om").read_text()) == rest
    promtool_blocks(tmp_path, "rest.om")


async def test_what_is_older_than_the_stores_window_is_kept_back(
    file_path: FilePath, store: FakeStore, tmp_path: Path
) -> None:
    history_, expected = file_path.world, file_path.samples
    async with running(history_.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, history_)
        args = [*options(config, history_, "rest.om"), "--remote-write", store.url]
        run = await backfill(*args, "--remote-write.window", "2h", cwd=tmp_path)
    assert run.code == 0, run.stderr
    rest = openmetrics_samples((tmp_path / "rest.om").read_text())
    sent = union(store.kept)
    oldest_sent = min(t for points in sent.values() for t, _ in points)
    newest_kept = max(t for points in rest.values() for t, _ in points)
    # The window less its guard (5 minutes) at the moment the oldest slice went.
    assert newest_kept < oldest_sent
    assert time.time() - 2 * 3600 < oldest_sent < time.time() - 2 * 3600 + 6 * 60
    assert f"{count(rest)} samples are older than the store takes" in run.stderr
    assert union(store.kept, rest) == expected


async def test_ctrl_c_while_a_request_is_in_flight_sends_no_batch_twice(
    file_path: FilePath, store: FakeStore, tmp_path: Path
) -> None:
    history_, expected = file_path.world, file_path.samples
    store.hold = 3
    async with running(history_.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, history_)
        args = [*options(config, history_, "rest.om"), "--remote-write", store.url]
        process = await start_backfill(*args, cwd=tmp_path)
        await asyncio.wait_for(store.held.wait(), 60)
        process.send_signal(signal.SIGINT)
        # Let the signal land before the store answers the request in flight.
        await asyncio.sleep(0.3)
        store.release.set()
        first = await finish(process)
        assert first.code == 130, first.stderr
        assert "interrupted" in first.stderr and "Traceback" not in first.stderr
        assert len(store.requests) == 3
        resumed = await backfill(*args, cwd=tmp_path)
    assert resumed.code == 0, resumed.stderr
    bodies = [tuple(map(repr, r.series)) for r in store.requests]
    assert len(set(bodies)) == len(bodies)
    assert union(store.kept) == expected
