"""Sharding by job id: replicas split the jobs, not the lists, and miss none."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Limits, Settings, ShardConfig
from exporter.server import ExporterState, build_app
from exporter.sharding import budget_share, shard_of
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.alaya import AlayaWorld
from tests.scrape_helpers import until_ready
from tests.target_helpers import aihc_target, alaya_target

PER_JOB = {"DescribeJob", "DescribeJobMetrics", "events", "gpu-metrics", "basic"}
LIMITS = Limits(requests_per_second=0, max_concurrency=16, retries=0)


def settings(url: str, simulator: Simulator, index: int, count: int) -> Settings:
    aihc = aihc_target(url, metric_types=["GpuUsage", "RDMAHealth"], page_size=10, limits=LIMITS)
    alaya = alaya_target(url, simulator, limits=LIMITS)
    return Settings(
        poll_interval=3600, aihc=[aihc], alaya=[alaya], shard=ShardConfig(index=index, count=count)
    )


def exported_jobs(text: str) -> set[tuple[str, str]]:
    jobs = set()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.labels.get("job_id"):
                jobs.add((s.labels["provider"], s.labels["job_id"]))
    return jobs


def series(text: str) -> set[str]:
    return {
        line for line in text.splitlines() if line.startswith(("training_job_", "training_pod_"))
    }


async def run_replica(aiohttp_client, url: str, simulator: Simulator, index: int, count: int):  # type: ignore[no-untyped-def]
    simulator.log.clear()
    app = build_app(settings(url, simulator, index, count))
    client: TestClient = await aiohttp_client(app)
    await until_ready(client)
    text = await (await client.get("/metrics")).text()
    per_job = sum(simulator.log.count(endpoint) for endpoint in PER_JOB)
    lists = simulator.log.count("DescribeJobs")
    await client.close()
    return text, per_job, lists


def disjoint(sets: Iterable[set[tuple[str, str]]]) -> bool:
    seen: set[tuple[str, str]] = set()
    for s in sets:
        if seen & s:
            return False
        seen |= s
    return True


async def test_three_shards_split_one_replica_exactly(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    world = AihcWorld.fixed(jobs=30, pods_per_job=2)
    simulator = Simulator(seed=11, aihc=world, alaya=AlayaWorld(seed=11, job_count=6))
    async with running(simulator) as served:
        whole_text, whole_calls, whole_lists = await run_replica(
            aiohttp_client, served.url, simulator, 0, 1
        )
        shards = [await run_replica(aiohttp_client, served.url, simulator, i, 3) for i in range(3)]
    whole = exported_jobs(whole_text)
    assert len(whole) == 36
    parts = [exported_jobs(text) for text, _, _ in shards]
    assert all(parts), "every shard should own some jobs with 36 of them"
    assert disjoint(parts)
    assert set().union(*parts) == whole
    # The same series, not only the same jobs (time-varying values aside).
    names = lambda text: {s.split("{")[0] + s.split("}")[0] for s in series(text)}  # noqa: E731
    assert set().union(*(names(t) for t, _, _ in shards)) == names(whole_text)
    assert sum(calls for _, calls, _ in shards) == whole_calls
    assert all(lists == whole_lists for _, _, lists in shards), "lists are read whole"
    for i, part in enumerate(parts):
        assert all(shard_of(p, j, 3) == i for p, j in part)


def test_shard_of_is_stable_and_spreads() -> None:
    assert shard_of("aihc", "job-abc", 3) == shard_of("aihc", "job-abc", 3)
    counts = [0, 0, 0]
    for n in range(3000):
        counts[shard_of("aihc", f"job-{n}", 3)] += 1
    assert all(900 < c < 1100 for c in counts), counts
    # Pinned, so a release never reshuffles which replica owns a job.
    assert [shard_of("aihc", f"job-{n}", 3) for n in range(8)] == [1, 1, 2, 1, 0, 2, 2, 0]


async def test_each_replica_spends_its_share_of_the_accounts_budget() -> None:
    # Three replicas of one account with requests_per_second 10: 10/3 each, and the plan's
    # budget and its gauge show the share.
    target = aihc_target("http://127.0.0.1:9", limits={"requests_per_second": 10})
    shard = ShardConfig(index=1, count=3)
    assert budget_share(target, shard).limits.requests_per_second == pytest.approx(10 / 3)
    assert budget_share(target, ShardConfig()) is target
    state = ExporterState(Settings(aihc=[target], shard=shard))
    (runner,) = state.build_scheduler().runners
    await runner.provider.close()
    assert runner.planner.budget == pytest.approx(10 / 3)
    assert runner.plan.budget == pytest.approx(10 / 3)
