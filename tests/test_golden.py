"""Golden expositions: each provider's fixed simulated world, read over HTTP by the real
provider and rendered by the real collector, compared byte for byte with `tests/golden/`.

A change to a provider's mapping, its labels, the metric contract or the renderer shows here
as a diff of the exposition a user would scrape. When the change is meant, write the files
again and review the diff with the change:

    TJE_UPDATE_GOLDEN=1 python3 -m pytest tests/test_golden.py

Everything that varies from run to run is held still: the worlds' clocks and the provider's
window are fixed times, ids and values come from seeds, the calls run one at a time (so parts
arrive in one order), and only the job and pod series are rendered (the exporter's own series
hold durations and wall-clock times).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from prometheus_client.exposition import choose_encoder

from bench.oneshot import PollResult, read_all
from exporter.collector import SnapshotCollector
from exporter.model import Failed, TargetSnapshot, Update, merge
from exporter.providers.aihc import AihcProvider
from exporter.providers.alaya import AlayaProvider
from exporter.providers.base import PollContext, Provider
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld, Spelling
from exporter.simulator.aihc_jobs import SimPod
from exporter.simulator.alaya import AlayaWorld
from exporter.store import SnapshotStore
from exporter.targets import tier_plan
from tests.providers.aihc.aihc_helpers import Harness
from tests.providers.alaya.alaya_helpers import T0, make_target

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TJE_UPDATE_GOLDEN") == "1"
AIHC_POOL = "cce-golden01"


def render(provider: str, result: PollResult) -> bytes:
    """The 0.0.4 text exposition of the result's job and pod series, as a scrape gets it."""
    assert result.ok, result
    jobs = {
        job_id: {p: o.samples for p, o in parts.items() if not isinstance(o, Failed)}
        for job_id, parts in result.jobs.items()
    }
    store = SnapshotStore()
    merged = merge(TargetSnapshot.empty(provider, "golden"), Update.of(jobs), T0, {"fast": 60.0})
    store.swap(merged.snapshot)
    view = store.view()
    encoder, content_type = choose_encoder("text/plain;version=0.0.4")
    return SnapshotCollector(lambda: view).render(view, encoder, content_type)


def compare(name: str, rendered: bytes) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.write_bytes(rendered)
    assert path.exists(), f"{path} is missing: run with TJE_UPDATE_GOLDEN=1 to write it"
    golden = path.read_bytes()
    if rendered != golden:
        diff = _first_difference(golden, rendered)
        pytest.fail(f"{name} differs from the golden file at line {diff} (see the module doc)")


def _first_difference(a: bytes, b: bytes) -> str:
    for number, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), 1):
        if x != y:
            return f"{number}:\n  golden: {x!r}\n  now:    {y!r}"
    return f"{min(len(a.splitlines()), len(b.splitlines())) + 1} (one is longer)"


def aihc_world() -> AihcWorld:
    """Two queues, three running jobs, one that succeeded and one that failed, with a flaky
    pod: every family of the AIHC mapping has series."""
    world = AihcWorld.fixed(
        seed=21, pools={AIHC_POOL: ["default", "research"]}, jobs=3, clock=lambda: T0
    )
    world.add_job(queue="research", status="Succeeded", created_at=T0 - 7200, finished_at="")
    failed = world.add_job(
        queue="default",
        status="Failed",
        created_at=T0 - 5400,
        pods=[SimPod("job-failed-master-0", replica_type="master", restarts=3)],
    )
    world.set_status(failed.job_id, "Failed")
    return world


async def poll(provider: Provider) -> PollResult:
    context = PollContext(deadline=time.monotonic() + 60, started_at=T0)
    try:
        return await read_all(provider, context, workers=1)
    finally:
        await provider.close()


@pytest.mark.parametrize("spelling", ["docs", "sdk"])
async def test_aihc_golden(spelling: Spelling) -> None:
    """The SDK's spelling renders the very same bytes as the documentation's."""
    world = aihc_world()
    world.spelling = spelling
    async with running(Simulator(seed=21, aihc=world)) as served:
        harness = Harness(world, served.simulator, served.url)
        target = harness.target(resource_pool_id=AIHC_POOL)
        provider = AihcProvider(target, SelfMetrics(), tier_plan(target, 60.0))
        rendered = render("aihc", await poll(provider))
    if spelling == "sdk" and UPDATE:
        # Written once, from the documentation's spelling.
        assert rendered == (GOLDEN / "aihc.prom").read_bytes()
        return
    compare("aihc.prom", rendered)


async def test_alaya_golden() -> None:
    world = AlayaWorld(seed=21, job_count=2, pods_per_job=2, cards_per_pod=2, clock=lambda: T0)
    async with running(Simulator(seed=21, alaya=world)) as served:
        target = make_target(served.url, world)
        provider = AlayaProvider(target, SelfMetrics(), tier_plan(target, 60.0))
        rendered = render("alaya", await poll(provider))
    compare("alaya.prom", rendered)
