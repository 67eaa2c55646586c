"""The real AihcProvider against the simulated AIHC over HTTP."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from exporter.metrics import KNOWN_JOB_STATUSES, SPEC_BY_NAME
from exporter.model import FAILED
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import DescribeJobMetricsReply, MetricPoint, PodSeries
from exporter.providers.aihc.series import JobSeries
from exporter.providers.aihc.target import AIHC_METRIC_TYPES, METRIC_BY_TYPE
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.aihc import DEMO_SECRET_ACCESS_KEY, SECRET_MARK, AihcWorld
from exporter.simulator.aihc_jobs import SimPod
from tests.providers.aihc.aihc_helpers import (
    POOL,
    QUEUES,
    Harness,
    failed_parts,
    jobs,
    labels,
    named,
    samples,
)

GPU = METRIC_BY_TYPE["GpuUsage"]
RUNNING = "training_job_running_seconds"


def calls(harness: Harness) -> Counter[str]:
    return Counter(e.endpoint for e in harness.simulator.log.entries)


async def test_a_listing_that_changes_only_usage_changes_only_the_usage_part(
    harness: Harness,
) -> None:
    """A running job's run time and a waiting job's queue wait move at every listing, their
    info and status seldom do: they are two parts, so the snapshot keeps the unchanged one as
    it was (nothing to pack, render or deflate again)."""
    waiting = harness.world.add_job(status="Pending", created_at=time.time() - 600)
    provider = harness.provider()
    now = time.time()
    first = await provider.list_jobs(PollContext(time.monotonic() + 30, now))
    ran = [j for j, r in first.readings.items() if named(r["usage"], RUNNING)]
    assert ran and waiting.job_id not in ran
    for job_id in ran:
        stats = {"gpuUtilizationPercent": 61.5, "runTimeNanoseconds": 10**9}
        harness.world.jobs[job_id].stats_override = stats
    second = await provider.list_jobs(PollContext(time.monotonic() + 30, now + 60))
    assert named(first.readings[waiting.job_id]["usage"], "training_job_queue_wait_seconds")
    for job_id in [*ran, waiting.job_id]:
        before, after = first.readings[job_id], second.readings[job_id]
        assert before["job"] == after["job"]
        assert before["usage"] != after["usage"]


@jobs(5)
async def test_every_job_is_exported_once_with_all_its_parts(harness: Harness) -> None:
    """Five jobs over three queues, listed in three pages: every job and part, once."""
    provider = harness.provider(page_size=2)
    result = await harness.poll(provider)
    assert result.ok and result.listed and result.failed_requests == 0
    assert set(result.jobs) == set(harness.world.jobs)
    for job_id, job in harness.world.jobs.items():
        parts = result.jobs[job_id]
        assert set(parts) == {
            "job",
            "usage",
            "pods",
            "events",
            "last_sample",
            *(f"metric:{t}" for t in AIHC_METRIC_TYPES),
        }
        found = samples(result, job_id)
        for s in found:
            assert s.label_names == SPEC_BY_NAME[s.name].labels, s
        (info,) = named(found, "training_job_info")
        assert labels(info)["queue"] == job.queue and labels(info)["resource_pool"] == POOL
        statuses = {labels(s)["status"]: s.value for s in named(found, "training_job_status")}
        assert statuses["Running"] == 1 and sum(statuses.values()) == 1
        assert set(KNOWN_JOB_STATUSES) <= set(statuses)
        pods = {labels(s)["pod"] for s in named(found, "training_pod_info")}
        assert pods == {p.name for p in job.pods}
        for metric_type in AIHC_METRIC_TYPES:
            series = named(found, METRIC_BY_TYPE[metric_type])
            assert {labels(s)["pod"] for s in series} == pods, metric_type
        assert {labels(s)["pod"] for s in named(found, "training_pod_restarts")} == pods
        assert named(found, "training_job_events_total")
        assert {
            labels(s)["pod"] for s in named(found, "training_pod_last_sample_timestamp_seconds")
        } == pods
    # Every (name, labels) appears once across the whole result.
    keys = [(s.name, s.label_values) for s in samples(result)]
    assert len(keys) == len(set(keys))


@jobs(5)
@pytest.mark.parametrize(
    ("overrides", "pages", "per_job"),
    [
        ({"page_size": 2}, 3, 1 + 22 + 1),
        ({"page_size": 2, "queues": list(QUEUES)}, 3, 1 + 22 + 1),
        ({"page_size": 2, "metric_types": ["GpuUsage", "CpuUsage"], "events": False}, 3, 1 + 2),
        ({"page_size": 1, "metric_types": ["GpuUsage"]}, 5, 1 + 1 + 1),
        ({"page_size": 5}, 1, 24),
    ],
)
async def test_calls_per_poll_are_pages_plus_jobs_times_per_job_calls(
    harness: Harness, overrides: dict[str, Any], pages: int, per_job: int
) -> None:
    """Five jobs (2, 2 and 1 in the three queues) in pages of one, two or five: a page call
    per page (the pool's or each queue's) and the per-job calls once per job."""
    provider = harness.provider(**overrides)
    for _ in range(2):
        harness.simulator.log.clear()
        result = await harness.poll(provider)
        assert result.ok
        assert len(harness.simulator.log.entries) == pages + 5 * per_job
        assert calls(harness)["DescribeJobs"] == pages
        assert calls(harness)["DescribeJob"] == 5
        assert all(e.status == 200 for e in harness.simulator.log.entries)


async def test_only_jobs_in_metric_statuses_get_per_job_calls(
    harness: Harness, world: AihcWorld
) -> None:
    for job in list(world.jobs.values())[:20]:
        job.status = "Succeeded"
        job.finished_at = "2025-05-12T12:58:04Z"
    result = await harness.poll(harness.provider())
    assert len(harness.simulator.log.entries) == 3 + 3 * 24
    assert len(result.jobs) == 23
    finished = [j for j, parts in result.jobs.items() if set(parts) == {"job", "usage"}]
    assert len(finished) == 20


@jobs(2)
async def test_usage_percent_becomes_a_ratio(harness: Harness, world: AihcWorld) -> None:
    job = next(iter(world.jobs.values()))
    pod = job.pods[0].name
    job.values[("GpuUsage", pod)] = ["87.5"]
    job.values[("GpuTemperature", pod)] = ["65"]
    job.values[("GpuPipeTensorUsage", pod)] = ["40"]
    found = samples(await harness.poll(harness.provider()), job.job_id)
    mine = {s.name: s.value for s in found if labels(s).get("pod") == pod}
    assert mine[GPU] == 0.875
    assert mine["training_pod_gpu_temperature_celsius"] == 65.0
    assert mine["training_pod_gpu_tensor_pipe_active_ratio"] == 0.4


@jobs(3)
async def test_usage_unit_ratio_takes_values_as_they_come(
    harness: Harness, world: AihcWorld
) -> None:
    world.usage_unit = "ratio"
    job = next(iter(world.jobs.values()))
    pod = job.pods[0].name
    job.values[("GpuUsage", pod)] = ["0.875"]
    result = await harness.poll(harness.provider(usage_unit="ratio"))
    found = samples(result, job.job_id)
    assert [s.value for s in named(found, GPU) if labels(s)["pod"] == pod] == [0.875]
    # Without overrides the simulator serves ratios too: all within 0-1.
    assert all(0 <= s.value <= 1 for s in named(samples(result), GPU))


@jobs(2)
async def test_odd_values_are_dropped_and_counted_the_rest_kept(
    harness: Harness, world: AihcWorld
) -> None:
    job = next(iter(world.jobs.values()))
    bad, good = job.pods[0].name, job.pods[1].name
    job.values[("GpuUsage", bad)] = ["", "NaN", "abc"]
    job.values[("CpuUsage", bad)] = ["50", "Infinity", "abc"]
    job.values[("GpuUsage", good)] = ["90"]
    result = await harness.poll(harness.provider())
    assert result.ok
    found = samples(result, job.job_id)
    gpu = {labels(s)["pod"]: s.value for s in named(found, GPU)}
    assert gpu == {good: 0.9}
    cpu = {labels(s)["pod"]: s.value for s in named(found, "training_pod_cpu_utilization_ratio")}
    # The newest parsable sample wins over newer garbage.
    assert cpu[bad] == 0.5
    assert harness.dropped("unparsable") == 3
    assert harness.dropped("not_finite") == 2
    # The other 20 metric types of the bad pod are untouched.
    assert (
        len(
            {
                s.name
                for s in found
                if labels(s).get("pod") == bad and s.name.startswith("training_pod_")
            }
        )
        >= 20
    )


@jobs(2)
async def test_a_pod_with_no_samples_has_info_but_no_resource_series(
    harness: Harness, world: AihcWorld
) -> None:
    job = next(iter(world.jobs.values()))
    quiet = job.pods[1]
    quiet.samples = False
    found = samples(await harness.poll(harness.provider()), job.job_id)
    by_pod = Counter(labels(s).get("pod") for s in found)
    assert named(found, "training_pod_info") and by_pod[quiet.name] > 0
    quiet_names = {s.name for s in found if labels(s).get("pod") == quiet.name}
    assert quiet_names == {"training_pod_info", "training_pod_phase", "training_pod_restarts"}


@jobs(3)
async def test_a_status_never_seen_before_gets_a_series_for_every_job(
    harness: Harness, world: AihcWorld
) -> None:
    """Three jobs: the status of one shows in the other two."""
    odd = next(iter(world.jobs.values()))
    odd.status = "Hibernating"
    provider = harness.provider()
    for _ in range(2):
        result = await harness.poll(provider)
        assert result.ok
        for job_id in world.jobs:
            statuses = {
                labels(s)["status"]: s.value
                for s in named(samples(result, job_id), "training_job_status")
            }
            assert "Hibernating" in statuses
            assert statuses["Hibernating"] == (1 if job_id == odd.job_id else 0)
    # Not in metric_statuses: listed, but no per-job calls.
    assert set(result.jobs[odd.job_id]) == {"job", "usage"}


@jobs(3)
async def test_finished_timestamp_is_absent_while_empty(harness: Harness, world: AihcWorld) -> None:
    running = list(world.jobs)
    empty = world.add_job(queue=QUEUES[0], status="Failed", finished_at="")
    done = world.add_job(queue=QUEUES[0], status="Succeeded", finished_at="2025-05-12T12:58:04Z")
    result = await harness.poll(harness.provider())
    name = "training_job_finished_timestamp_seconds"
    assert named(samples(result, empty.job_id), name) == []
    assert [s.value for s in named(samples(result, done.job_id), name)] == [1747054684.0]
    assert all(named(samples(result, j), name) == [] for j in running)


@pytest.mark.parametrize("shape", ["top", "nested", "alternate"])
async def test_both_describe_job_reply_shapes(
    harness: Harness, world: AihcWorld, shape: str
) -> None:
    world.describe_job_shape = shape  # type: ignore[assignment]
    result = await harness.poll(harness.provider(metric_types=["GpuUsage"]))
    assert result.ok
    pods = named(samples(result), "training_pod_phase")
    assert {labels(s)["pod"] for s in pods} == {p.name for j in world.jobs.values() for p in j.pods}


@jobs(2)
async def test_names_with_quotes_backslashes_newlines_and_chinese_survive(
    harness: Harness, world: AihcWorld
) -> None:
    name = 'say "hi"\\n\n训练任务-预训练'
    job = world.add_job(queue=QUEUES[1], name=name, pods=[SimPod('pod "0"\\\n任务')])
    found = samples(await harness.poll(harness.provider()), job.job_id)
    (info,) = named(found, "training_job_info")
    assert labels(info)["job_name"] == name
    assert {labels(s)["pod"] for s in named(found, GPU)} == {'pod "0"\\\n任务'}


@jobs(3)
async def test_no_secret_field_reaches_a_sample_or_a_log(harness: Harness) -> None:
    with capture_logs() as logs:
        result = await harness.poll(harness.provider())
        harness.simulator.faults.error_rates = {500: 1.0}
        harness.simulator.faults.only = frozenset({"DescribeJob"})
        await harness.poll(harness.provider(metric_types=["GpuUsage"]))
    text = json.dumps([s.label_values for s in samples(result)], ensure_ascii=False)
    assert SECRET_MARK not in text
    assert "robot" not in text and "NCCL" not in text and "torchrun" not in text
    assert logs, "the failing calls should have been logged"
    logged = json.dumps(logs, ensure_ascii=False, default=str)
    assert SECRET_MARK not in logged and DEMO_SECRET_ACCESS_KEY not in logged
    assert "sim-fault" in logged  # the BCE requestId of the failed calls


async def test_windows_start_after_the_newest_sample_seen(
    harness: Harness, world: AihcWorld
) -> None:
    provider = harness.provider(metric_types=["GpuUsage"], time_step=60, first_window_steps=5)
    await harness.poll(provider)
    first = list(world.metric_requests)
    assert len(first) == 23
    for body in first:
        assert all(isinstance(body[k], str) for k in ("startTime", "endTime", "timeStep"))
        assert int(body["endTime"]) - int(body["startTime"]) == 300
        assert body["timeStep"] == "60"
    first_start = int(first[0]["startTime"])
    world.metric_requests.clear()
    await harness.poll(provider)
    assert len(world.metric_requests) == 23
    for body in world.metric_requests:
        start, end = int(body["startTime"]), int(body["endTime"])
        # Back to back: the newest point seen is at most a step or two old, so the window
        # shrinks from five steps to about one.
        assert start > first_start and 60 <= end - start <= 120


@jobs(2)
async def test_a_quiet_window_keeps_the_newest_sample(harness: Harness, world: AihcWorld) -> None:
    job = next(iter(world.jobs.values()))
    pod = job.pods[0].name
    job.values[("GpuUsage", pod)] = ["75"]
    provider = harness.provider(metric_types=["GpuUsage"])
    await harness.poll(provider)
    # The next windows have no point for this pod at all.
    job.values[("GpuUsage", pod)] = []
    for _ in range(2):
        result = await harness.poll(provider)
        values = [
            s.value for s in named(samples(result, job.job_id), GPU) if labels(s)["pod"] == pod
        ]
        assert values == [0.75]


@jobs(3)
async def test_lifecycle_resource_series_go_first_then_everything(
    harness: Harness, world: AihcWorld
) -> None:
    """Three jobs of all 22 metric types: one finishes and goes, two stay listed."""
    job = next(iter(world.jobs.values()))
    provider = harness.provider()
    result = await harness.poll(provider)
    assert named(samples(result, job.job_id), GPU)
    job.status = "Succeeded"
    job.finished_at = "2025-05-12T12:58:04Z"
    result = await harness.poll(provider)
    # Its resource series go; one final read keeps its last pods and events while it is listed.
    assert set(result.jobs[job.job_id]) == {"job", "usage", "pods", "events"}
    assert {p.tier for p in result.jobs[job.job_id].values()} == {"fast", "final"}
    assert named(samples(result, job.job_id), "training_pod_phase")
    assert named(samples(result, job.job_id), "training_job_events_total")
    again = await harness.poll(provider)
    assert set(again.jobs[job.job_id]) == {"job", "usage"}, "the final read happens once"
    statuses = {
        labels(s)["status"]: s.value
        for s in named(samples(result, job.job_id), "training_job_status")
    }
    assert statuses["Succeeded"] == 1 and statuses["Running"] == 0
    job.removed_at = time.time() - 1
    result = await harness.poll(provider)
    assert job.job_id not in result.jobs and len(result.jobs) == 2


@jobs(2)
async def test_a_pod_that_goes_away_takes_its_series_along(
    harness: Harness, world: AihcWorld
) -> None:
    job = next(iter(world.jobs.values()))
    gone = job.pods.pop()
    provider = harness.provider(metric_types=["GpuUsage"])
    job.pods.append(gone)
    await harness.poll(provider)
    job.pods.remove(gone)
    # Gone from the metric series once a pods read has seen it go (reads of one poll run
    # concurrently, so the next poll's).
    await harness.poll(provider)
    found = samples(await harness.poll(provider), job.job_id)
    assert gone.name not in {labels(s).get("pod") for s in found}


async def test_a_job_created_mid_paging_is_neither_lost_nor_doubled(
    harness: Harness, world: AihcWorld
) -> None:
    def create_on_page_two(pool: str, queue: str | None, page: int) -> None:
        if page == 2 and len(world.jobs) == 23:
            world.add_job(queue=QUEUES[2], created_at=time.time())

    world.before_page = create_on_page_two
    result = await harness.poll(harness.provider(metric_types=["GpuUsage"]))
    assert result.ok
    assert set(result.jobs) == set(world.jobs) and len(result.jobs) == 24
    keys = [(s.name, s.label_values) for s in samples(result)]
    assert len(keys) == len(set(keys))


async def test_a_job_finishing_mid_paging_is_listed_once(
    harness: Harness, world: AihcWorld
) -> None:
    first = next(iter(world.jobs.values()))

    def finish_on_page_two(pool: str, queue: str | None, page: int) -> None:
        if page == 2:
            first.status = "Succeeded"

    world.before_page = finish_on_page_two
    result = await harness.poll(harness.provider(metric_types=["GpuUsage"]))
    assert result.ok and len(result.jobs) == 23
    assert len(named(samples(result, first.job_id), "training_job_info")) == 1


async def test_a_job_that_slips_between_pages_keeps_its_last_series(
    harness: Harness, world: AihcWorld
) -> None:
    provider = harness.provider(metric_types=["GpuUsage"])
    await harness.poll(provider)
    ordered = sorted(world.jobs.values(), key=lambda j: j.created_at)
    deleted, slipped = ordered[0], ordered[10]

    def delete_on_page_two(pool: str, queue: str | None, page: int) -> None:
        if page == 2:
            deleted.removed_at = time.time() - 1

    world.before_page = delete_on_page_two
    result = await harness.poll(provider)
    # The job that moved from page 2 to page 1 was never seen: carried, not dropped. The
    # deleted one was listed, then its calls said 404: gone, and no failure either.
    assert result.ok
    assert set(result.jobs[slipped.job_id].values()) == {FAILED}
    assert deleted.job_id not in result.jobs
    assert len(result.jobs) == 22
    world.before_page = None
    result = await harness.poll(provider)
    assert deleted.job_id not in result.jobs and slipped.job_id in result.jobs
    assert FAILED not in result.jobs[slipped.job_id].values()


@jobs(5)
async def test_sharding_reads_the_list_whole_and_only_owned_jobs(
    harness: Harness, world: AihcWorld
) -> None:
    """Five jobs in three pages, two of them owned."""
    owned = set(sorted(world.jobs)[:2])
    result = await harness.poll(harness.provider(page_size=2), owns=lambda job_id: job_id in owned)
    assert set(result.jobs) == owned
    assert len(harness.simulator.log.entries) == 3 + 2 * 24


async def test_refused_credentials_stop_the_poll_without_retries(harness: Harness) -> None:
    with capture_logs() as logs:
        provider = harness.provider(secret_access_key="wrong-secret-key")
        result = await harness.poll(provider)
    assert not result.listed and not result.ok and result.jobs == {}
    assert result.failed_requests == 1
    assert [(e.endpoint, e.status) for e in harness.simulator.log.entries] == [
        ("DescribeJobs", 403)
    ]
    logged = json.dumps(logs, default=str)
    assert "wrong-secret-key" not in logged and "AccessDenied" in logged
    assert any(e.get("request_id", "").startswith("sim-") for e in logs)
    assert any("credentials refused" in e["event"] for e in logs)


async def test_unknown_access_key_is_refused_too(harness: Harness) -> None:
    result = await harness.poll(harness.provider(access_key_id="no-such-key"))
    assert not result.ok
    assert [e.status for e in harness.simulator.log.entries] == [403]


async def test_an_expired_signature_is_retried_with_a_fresh_one(harness: Harness) -> None:
    stale = [True]

    def clock() -> float:
        # The first signature is an hour old; every later one is fresh.
        if stale[0]:
            stale[0] = False
            return time.time() - 3600
        return time.time()

    result = await harness.poll(harness.provider(clock=clock, metric_types=["GpuUsage"]))
    assert result.ok
    statuses = [(e.endpoint, e.status) for e in harness.simulator.log.entries][:2]
    assert statuses == [("DescribeJobs", 400), ("DescribeJobs", 200)]
    retries = harness.metrics.registry.get_sample_value(
        "training_exporter_api_retries_total", {"provider": "aihc", "endpoint": "DescribeJobs"}
    )
    assert retries == 1


async def test_server_errors_are_retried_then_the_part_fails(harness: Harness) -> None:
    faults = harness.simulator.faults
    faults.error_rates = {503: 1.0}
    faults.only = frozenset({"DescribeJobMetrics"})
    result = await harness.poll(harness.provider(metric_types=["GpuUsage"], events=False))
    assert not result.ok and result.listed
    assert result.failed_requests == 23
    assert failed_parts(result) == {(j, "metric:GpuUsage") for j in harness.world.jobs}
    # 1 try + 2 retries per metric call, each answered 503.
    assert calls(harness)["DescribeJobMetrics"] == 23 * 3
    assert named(samples(result), "training_pod_phase")


@pytest.mark.parametrize(
    ("fault", "endpoint"),
    [
        ("wrong_types_rate", "DescribeJob"),
        ("malformed_rate", "DescribeJobMetrics"),
        ("html_error_rate", "events"),
        ("wrong_types_rate", "DescribeJobs"),
        ("malformed_rate", "DescribeJobs"),
    ],
)
@jobs(3)
async def test_bad_upstream_json_fails_that_part_only(
    harness: Harness, fault: str, endpoint: str
) -> None:
    provider = harness.provider(metric_types=["GpuUsage"])
    good = await harness.poll(provider)
    setattr(harness.simulator.faults, fault, 1.0)
    harness.simulator.faults.only = frozenset({endpoint})
    result = await harness.poll(provider)
    assert not result.ok
    if endpoint == "DescribeJobs":
        assert not result.listed and result.jobs == {}
        return
    part = {"DescribeJob": "pods", "DescribeJobMetrics": "metric:GpuUsage", "events": "events"}
    assert failed_parts(result) == {(j, part[endpoint]) for j in good.jobs}
    assert all(result.jobs[j][p] is not FAILED for j in good.jobs for p in ("job", "usage"))


async def test_a_failed_poll_forgets_nothing_and_the_next_recovers(
    harness: Harness, world: AihcWorld
) -> None:
    provider = harness.provider(metric_types=["GpuUsage"])
    await harness.poll(provider)
    harness.simulator.faults.error_rates = {500: 1.0}
    assert not (await harness.poll(provider)).listed
    harness.simulator.faults.error_rates = {}
    result = await harness.poll(provider)
    assert result.ok and set(result.jobs) == set(world.jobs)


@jobs(5)
async def test_describe_names_the_target_without_secrets(harness: Harness) -> None:
    provider = harness.provider(queues=["q-alpha"])
    await harness.poll(provider)
    facts = provider.describe()
    assert facts["resource_pool"] == POOL and facts["queues"] == "q-alpha"
    assert facts["jobs"] == "2"
    assert DEMO_SECRET_ACCESS_KEY not in json.dumps(facts)


@jobs(3)
async def test_a_pod_phase_never_seen_before_gets_a_series_in_every_pod_from_its_next_read(
    harness: Harness, world: AihcWorld
) -> None:
    """Three jobs of two pods: the phase of one shows in all six."""
    jobs = list(world.jobs.values())
    jobs[-1].pods[0].phase = "Evicted"
    provider = harness.provider(metric_types=["GpuUsage"])
    await harness.poll(provider)
    # Every pod's state set has it from its next pods read on.
    result = await harness.poll(provider)
    phases = named(samples(result), "training_pod_phase")
    evicted = [s for s in phases if labels(s)["phase"] == "Evicted"]
    assert len(evicted) == 6
    assert [labels(s)["pod"] for s in evicted if s.value == 1] == [jobs[-1].pods[0].name]


async def test_a_job_deleted_after_listing_is_dropped_without_failing(
    harness: Harness, world: AihcWorld
) -> None:
    doomed = next(iter(world.jobs.values()))

    def delete_once_listed(action: str, body: Mapping[str, Any]) -> None:
        if action == "DescribeJob":
            doomed.removed_at = time.time() - 1

    world.before_action = delete_once_listed
    result = await harness.poll(harness.provider(metric_types=["GpuUsage"]))
    assert doomed.job_id not in result.jobs and len(result.jobs) == 22
    assert result.ok


_READS = st.lists(
    st.tuples(
        st.sampled_from(["GpuUsage", "GpuMemoryUsage", "CpuUsage"]),
        st.dictionaries(
            st.sampled_from(["p0", "p1", "p2"]),
            st.lists(st.tuples(st.integers(1, 50), st.sampled_from(["0.5", "x", "200"]))),
        ),
        st.none() | st.frozensets(st.sampled_from(["p0", "p1", "p2"])),
    ),
    max_size=12,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_READS)
def test_each_pods_newest_point_is_kept_as_a_walk_of_every_series_finds_it(reads: Any) -> None:
    """`state.newest` is updated as points come; a pod that goes takes its point along."""
    who = JobIdentity(POOL, "default", "job")
    state = JobSeries("percent", partial(SelfMetrics().drop, "aihc"))
    for metric_type, by_pod, pods in reads:
        state.pods = None if pods is None else set(pods)
        reply = DescribeJobMetricsReply(
            tuple(
                PodSeries(pod, tuple(MetricPoint(str(at), value) for at, value in points))
                for pod, points in by_pod.items()
            ),
            {},
        )
        state.add_reply(metric_type, who, reply)
        assert state.newest == state.walk_newest()
