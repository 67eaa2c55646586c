"""End to end into the two real stores, started here (a fresh one for each test): the
simulator's history -> `backfill --remote-write` -> Prometheus 2.42's receiver (an out-of-order
window longer than the history) or VictoriaMetrics 1.79 -> every raw sample read back.

What the store holds must be exactly the samples the file path writes for the same history
(which tests/backfill/test_backfill_e2e.py holds to the simulator through promtool), each once,
and for a pod the simulator's own points. A second run sends no request (the store's own
request counter says so) and changes nothing; a run interrupted and resumed leaves what an
uninterrupted one leaves.

Every test sends the one history `file_path` (tests/backfill/conftest.py) read once through the
file path: a backfill process costs more CPU than starting a store (1.2 against 0.1 CPU-s), so
each test gets an empty store of its own rather than a history of its own."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.simulator import running
from tests.backfill.backfill_helpers import (
    FilePath,
    History,
    aihc_points,
    backfill,
    interrupt,
    options,
    write_config,
)
from tests.backfill.real_stores import RealStore, Samples, start_prometheus, start_victoria

pytestmark = [
    pytest.mark.slow,
    # The module's tests run on one worker (`tests.scheduling.GROUPS`), which reads the
    # history once.
    pytest.mark.timeout(180),
]


@pytest.fixture(params=["prometheus", "victoria"])
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RealStore]:
    """An empty store of each kind."""
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == "prometheus":
        started = start_prometheus(tmp, ooo_window="6h")
    else:
        started = start_victoria(tmp)
    yield started
    started.stop()


def held(store: RealStore, world: History, expected: Samples | None = None) -> Samples:
    """The world's samples in the store; given `expected`, read again for up to 20 s until
    they are that: VictoriaMetrics makes new series searchable a moment after it took them."""
    ids = "|".join(world.job_ids)
    deadline = time.monotonic() + 20
    while True:
        got = store.samples(f'{{job_id=~"{ids}"}}', world.since, world.until)
        if expected is None or got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


async def test_every_sample_once_and_a_rerun_sends_nothing(
    store: RealStore, file_path: FilePath, tmp_path: Path
) -> None:
    world, expected = file_path.world, file_path.samples
    async with running(world.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, world)
        args = [*options(config, world, "rest.om"), "--remote-write", store.write_url]
        run = await backfill(*args, cwd=tmp_path)
        assert run.code == 0, run.stderr
        # The window each store takes, as asked from it.
        said = {
            "prometheus": "takes samples up to 6h old (out_of_order_time_window 6h)",
            "victoria": "VictoriaMetrics: takes samples up to 31d old (-retentionPeriod 31d)",
        }
        assert f"remote write to {store.write_url}: " in run.stderr
        assert said[store.name] in run.stderr
        total = sum(len(points) for points in expected.values())
        assert f"remote write: {total} samples sent" in run.stderr
        assert not (tmp_path / "rest.om").exists()
        got = held(store, world, expected)
        assert got == expected
        # And against the simulator itself, for one pod.
        job = world.aihc_running
        pod = job.pods[0].name
        gpu = [
            v
            for k, v in got.items()
            if ("pod", pod) in k and ("__name__", "training_pod_gpu_utilization_ratio") in k
        ]
        assert gpu == [[(float(t), v) for t, v in aihc_points(world, job, pod, "GpuUsage")]]

        requests = store.write_requests()
        again = await backfill(*args, cwd=tmp_path)
        assert again.code == 0, again.stderr
        assert "this run 0 in 0 requests" in again.stderr
        assert store.write_requests() == requests
    assert held(store, world, expected) == expected


async def test_interrupted_and_resumed_equals_uninterrupted(
    store: RealStore, file_path: FilePath, tmp_path: Path
) -> None:
    world, expected = file_path.world, file_path.samples
    async with running(world.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, world)
        args = [*options(config, world, "rest.om"), "--remote-write", store.write_url]
        code, stderr = await interrupt(world, args, tmp_path, signal.SIGINT, 6)
        assert code == 130, stderr
        assert held(store, world) == {}
        resumed = await backfill(*args, cwd=tmp_path)
        assert resumed.code == 0, resumed.stderr
        assert "resuming" in resumed.stderr
    assert held(store, world, expected) == expected
