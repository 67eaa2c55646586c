"""Job-wide GPU figures that live DescribeJobs replies carry beyond the documented tables.

Exported for every listed job that carries them, running or not, from the list itself (no
extra call); absent, no series; unparsable or out of range, no series and counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from decimal import Decimal
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Settings
from exporter.server import build_app
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_replies import job_gpu_percent
from tests.providers.aihc.aihc_helpers import Harness, jobs

ClientFactory = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]

GPU = "training_job_gpu_utilization_ratio"
MEMORY = "training_job_gpu_memory_utilization_ratio"
RUNNING = "training_job_running_seconds"


def ratio(percent: float) -> float:
    return float(Decimal(repr(percent)) / 100)


async def scrape(harness: Harness, aiohttp_client: ClientFactory) -> dict[str, dict[str, float]]:
    """{family: {job_id: value}} of the job-level families, after the first poll (pages of
    two)."""
    target = harness.target(metric_types=["GpuUsage"], page_size=2)
    settings = Settings(aihc=[target], poll_interval=3600)
    client = await aiohttp_client(build_app(settings))
    for _ in range(300):
        if (await client.get("/-/ready")).status == 200:
            break
        await asyncio.sleep(0.05)
    text = await (await client.get("/metrics")).text()
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if "job_id" in sample.labels and "pod" not in sample.labels:
                found.setdefault(sample.name, {})[sample.labels["job_id"]] = sample.value
            elif sample.name == "training_exporter_dropped_values_total":
                found.setdefault("dropped", {})[sample.labels["reason"]] = sample.value
    return found


@jobs(5)
async def test_job_figures_are_exported_where_the_list_carries_them(
    harness: Harness, world: AihcWorld, aiohttp_client: ClientFactory
) -> None:
    """Five running jobs (three with the figures) and a pending one, in three pages."""
    # A job that is not running (no per-job calls are made for it) carries them too.
    pending = world.add_job(status="Pending", stats=True)
    asked: list[tuple[str, Any]] = []
    world.before_action = lambda action, body: asked.append((action, body.get("jobId")))
    before = time.time()
    found = await scrape(harness, aiohttp_client)
    after = time.time()

    with_stats = {j.job_id: j for j in world.jobs.values() if j.stats}
    without = set(world.jobs) - set(with_stats)
    assert with_stats and without
    for name in (GPU, MEMORY, RUNNING):
        assert set(found[name]) == set(with_stats), name
    for job_id, job in with_stats.items():
        if job is pending:
            assert found[GPU][job_id] == 0 and found[MEMORY][job_id] == 0
            assert found[RUNNING][job_id] == 0
            continue
        # Percent to ratio through the decimal text: 78.82 is 0.7882, not 0.7882000000000001.
        assert found[GPU][job_id] == ratio(job_gpu_percent(world, job, "gpu"))
        assert found[MEMORY][job_id] == ratio(job_gpu_percent(world, job, "memory"))
        # The list was read between `before` and `after`; nanoseconds make seconds.
        ran = found[RUNNING][job_id]
        assert before - job.created_at - 1 <= ran <= after - job.created_at + 1
    # From the list: the pending job had no per-job call, and the list no extra page.
    assert [a for a in asked if a[1] == pending.job_id] == []
    assert not any(pending.job_id in e.path for e in harness.simulator.log.entries)
    assert [a for a, _ in asked].count("DescribeJobs") == 3  # 6 jobs, pages of 2
    assert "dropped" not in found or not found["dropped"]


@jobs(5)
async def test_unparsable_or_out_of_range_job_figures_are_dropped_and_counted(
    harness: Harness, world: AihcWorld, aiohttp_client: ClientFactory
) -> None:
    """Five jobs, three with the figures: one odd, two that keep theirs."""
    odd = next(j for j in world.jobs.values() if j.stats)
    odd.stats_override = {
        "gpuUtilizationPercent": "n/a",
        "gpuMemoryUtilizationPercent": "150",
        "runTimeNanoseconds": -5,
    }
    found = await scrape(harness, aiohttp_client)

    for name in (GPU, MEMORY, RUNNING):
        assert odd.job_id not in found[name]
        assert found[name], "the other jobs keep theirs"
    assert found["dropped"] == {"unparsable": 1, "out_of_range": 2}
    # The job itself is exported as ever.
    assert found["training_job_status"][odd.job_id] in (0.0, 1.0)
