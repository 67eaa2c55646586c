"""AlayaProvider against the simulator over HTTP: series, values, both failure forms."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from pydantic import SecretStr

from bench.oneshot import PollResult
from exporter.config import Limits
from exporter.model import CARD_LABELS, POD_LABELS, TARGET_LABELS, TargetSnapshot, merge
from exporter.providers.alaya import AlayaProvider, JobTarget
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator
from exporter.simulator.alaya import DEMO_API_KEY, AlayaFault, AlayaWorld, ErrorForm
from exporter.targets import tier_plan
from exporter.transport.iface import ApiError

from .alaya_helpers import (
    T0,
    all_drops,
    drops,
    failed_parts,
    labels_of,
    make_target,
    newest_sample_time,
    part,
    poll,
    requests,
    retries,
    samples,
)

Factory = Callable[..., AlayaProvider]
GPU = "training_pod_gpu_utilization_ratio"
VRAM = "training_pod_gpu_memory_utilization_ratio"
CPU = "training_pod_cpu_utilization_ratio"
MEMORY = "training_pod_memory_utilization_ratio"
WINDOW_15M = 900
CALLS_PER_POD = 5  # four types and basic


def expected_latest(
    world: AlayaWorld, metric_type: str, window: int = WINDOW_15M
) -> dict[tuple[str, ...], float]:
    """Every series' newest value as the simulator's data has it, by label values."""
    t = newest_sample_time(world, window)
    per_card = metric_type in ("gpu", "vram")
    expected: dict[tuple[str, ...], float] = {}
    for job_id, pods in world.jobs.items():
        for pod in pods:
            for card in range(world.cards_per_pod) if per_card else [None]:
                labels: tuple[str, ...] = ("alaya", "", "", job_id, pod)
                if card is not None:
                    labels = (*labels, world.card_names()[card])
                expected[labels] = world.value(job_id, pod, metric_type, card, t)
    return expected


def exported(result: PollResult, name: str) -> dict[tuple[str, ...], float]:
    return {s.label_values: s.value for s in samples(result, name)}


async def test_two_jobs_four_pods_eight_cards(make_provider: Factory, world: AlayaWorld) -> None:
    result = await poll(make_provider())

    assert result.ok and result.failed_requests == 0
    for name, metric_type, count in (
        (GPU, "gpu", 2 * 4 * 8),
        (VRAM, "vram", 2 * 4 * 8),
        (CPU, "cpu", 2 * 4),
        (MEMORY, "memory", 2 * 4),
    ):
        got = exported(result, name)
        assert len(got) == count, name
        assert got == expected_latest(world, metric_type), name
    for sample in samples(result, GPU) + samples(result, VRAM):
        assert sample.label_names == CARD_LABELS
    # gpuName is absent on cpu / memory: pod-level series without a `gpu` label.
    for sample in samples(result, CPU) + samples(result, MEMORY):
        assert sample.label_names == POD_LABELS


async def test_window_gauges_come_from_max_and_avg_rate(
    make_provider: Factory, world: AlayaWorld
) -> None:
    result = await poll(make_provider())

    job_id, pods = next(iter(world.jobs.items()))
    times = world.sample_times(T0 - WINDOW_15M, T0)
    values = [world.value(job_id, pods[1], "gpu", 3, t) for t in times]
    card = ("alaya", "", "", job_id, pods[1], "NVIDIA-H800A-NV-80G-3")
    max_ = exported(result, "training_pod_gpu_utilization_window_max_ratio")
    avg = exported(result, "training_pod_gpu_utilization_window_avg_ratio")
    assert max_[card] == max(values)
    assert avg[card] == pytest.approx(sum(values) / len(values), abs=1e-4)
    assert len(exported(result, "training_pod_gpu_memory_utilization_window_max_ratio")) == 64
    assert len(exported(result, "training_pod_cpu_utilization_window_avg_ratio")) == 8
    assert len(exported(result, "training_pod_memory_utilization_window_max_ratio")) == 8


async def test_query_window_and_last_sample(make_provider: Factory, world: AlayaWorld) -> None:
    result = await poll(make_provider())

    (window,) = samples(result, "training_alaya_query_window_seconds")
    assert window.label_names == TARGET_LABELS
    assert window.label_values == ("alaya", "alaya-test")
    assert window.value == WINDOW_15M
    assert "window" in result.jobs[""]
    last = exported(result, "training_pod_last_sample_timestamp_seconds")
    assert len(last) == 8
    assert set(last.values()) == {newest_sample_time(world, WINDOW_15M)}


async def test_period_is_sent_as_configured(make_provider: Factory, alaya_sim: Simulator) -> None:
    # 1h: the shortest preset but the default 15m (a longer one only makes the replies longer).
    await poll(make_provider(period="1h"))

    metric_calls = [e for e in alaya_sim.log.entries if e.endpoint == "gpu-metrics"]
    assert len(metric_calls) == 2 * 4 * 4
    assert {e.query["period"] for e in metric_calls} == {"1h"}
    assert {e.query["type"] for e in metric_calls} == {"gpu", "vram", "cpu", "memory"}
    assert all("startTime" not in e.query for e in metric_calls)


async def test_lookback_is_sent_as_start_and_end_in_the_time_zone(
    make_provider: Factory, alaya_sim: Simulator, world: AlayaWorld
) -> None:
    now = T0 - 7200.0  # two hours before the simulator's clock: data must cover [now-30m, now]
    result = await poll(make_provider(period=None, lookback=1800.0), started_at=now)

    zone = ZoneInfo("Asia/Shanghai")
    metric_calls = [e for e in alaya_sim.log.entries if e.endpoint == "gpu-metrics"]
    assert {(e.query["startTime"], e.query["endTime"]) for e in metric_calls} == {
        (
            datetime.fromtimestamp(now - 1800, zone).strftime("%Y-%m-%d %H:%M:%S"),
            datetime.fromtimestamp(now, zone).strftime("%Y-%m-%d %H:%M:%S"),
        )
    }
    assert metric_calls[0].query["endTime"] == "2025-09-10 16:13:20"
    assert all("period" not in e.query for e in metric_calls)
    assert result.ok
    (window,) = samples(result, "training_alaya_query_window_seconds")
    assert window.value == 1800
    t = world.sample_times(int(now) - 1800, int(now))[-1]
    job_id = next(iter(world.jobs))
    got = exported(result, CPU)
    assert got[("alaya", "", "", job_id, "worker-2")] == world.value(
        job_id, "worker-2", "cpu", None, t
    )


async def test_lookback_uses_the_configured_time_zone(
    make_provider: Factory, alaya_sim: Simulator
) -> None:
    await poll(make_provider(period=None, lookback=600.0, time_zone="UTC"))

    (call, *_) = [e for e in alaya_sim.log.entries if e.endpoint == "gpu-metrics"]
    assert call.query == {
        "type": call.query["type"],
        "startTime": "2025-09-10 10:03:20",
        "endTime": "2025-09-10 10:13:20",
    }


async def test_bearer_key_is_sent(make_provider: Factory, alaya_sim: Simulator) -> None:
    # The simulator answers 403 to anything but the right bearer key: a clean poll proves it.
    result = await poll(make_provider())
    assert result.ok
    assert alaya_sim.log.count(status=403) == 0
    assert alaya_sim.log.count("basic") == 8


@pytest.mark.parametrize("form", ["body", "http"])
async def test_wrong_api_key_fails_every_call_without_retry(
    make_provider: Factory,
    alaya_sim: Simulator,
    world: AlayaWorld,
    metrics: SelfMetrics,
    form: ErrorForm,
) -> None:
    world.auth_error_form = form
    result = await poll(make_provider(api_key=SecretStr("not-the-key")))

    assert not result.ok
    assert result.failed_requests == 2 * 4 * CALLS_PER_POD
    assert len(failed_parts(result)) == 2 * 4 * CALLS_PER_POD
    assert samples(result, GPU) == []
    # Auth failures are never retried: one request per call.
    assert len(alaya_sim.log.entries) == 2 * 4 * CALLS_PER_POD
    assert requests(metrics, "gpu-metrics", "403") == 2 * 4 * 4
    assert requests(metrics, "basic", "403") == 8
    assert retries(metrics, "gpu-metrics") == 0


@pytest.mark.parametrize("form", ["body", "http"])
async def test_403_on_one_call_fails_that_part_only(
    make_provider: Factory,
    alaya_sim: Simulator,
    world: AlayaWorld,
    metrics: SelfMetrics,
    form: ErrorForm,
) -> None:
    job_id = next(iter(world.jobs))
    world.faults.append(
        AlayaFault("status", status=403, form=form, job=job_id, pod="worker-1", type="gpu")
    )
    result = await poll(make_provider())

    assert result.failed_requests == 1 and not result.ok
    assert failed_parts(result) == [(job_id, "worker-1:gpu")]
    assert requests(metrics, "gpu-metrics", "403") == 1
    assert alaya_sim.log.count("gpu-metrics") == 2 * 4 * 4
    # Every other card and pod is still there.
    assert len(exported(result, GPU)) == 2 * 4 * 8 - 8
    assert len(exported(result, VRAM)) == 2 * 4 * 8


@pytest.mark.parametrize("form", ["body", "http"])
async def test_500_is_retried_and_recovers(
    make_provider: Factory,
    alaya_sim: Simulator,
    world: AlayaWorld,
    metrics: SelfMetrics,
    form: ErrorForm,
) -> None:
    job_id = next(iter(world.jobs))
    world.faults.append(
        AlayaFault(
            "status", status=500, form=form, job=job_id, pod="worker-0", type="vram", times=1
        )
    )
    result = await poll(make_provider())

    assert result.ok
    assert requests(metrics, "gpu-metrics", "500") == 1
    assert retries(metrics, "gpu-metrics") == 1
    assert len(exported(result, VRAM)) == 2 * 4 * 8


@pytest.mark.parametrize("form", ["body", "http"])
async def test_500_that_persists_fails_the_part_after_retries(
    make_provider: Factory,
    alaya_sim: Simulator,
    world: AlayaWorld,
    metrics: SelfMetrics,
    form: ErrorForm,
) -> None:
    job_id = list(world.jobs)[1]
    world.faults.append(
        AlayaFault("status", status=500, form=form, job=job_id, pod="worker-3", endpoint="basic")
    )
    result = await poll(make_provider())

    assert failed_parts(result) == [(job_id, "worker-3:basic")]
    # FAST allows 2 retries: three attempts.
    assert requests(metrics, "basic", "500") == 3
    assert len(samples(result, "training_pod_info")) == 7


async def test_empty_metric_data_and_empty_data_are_not_failures(
    make_provider: Factory, world: AlayaWorld, metrics: SelfMetrics
) -> None:
    first, second = world.jobs
    world.faults += [
        AlayaFault("empty", job=first, pod="worker-0", type="gpu"),
        AlayaFault("empty_data", job=second, pod="worker-0", type="cpu"),
        AlayaFault("empty_data", job=second, pod="worker-1", endpoint="basic"),
    ]
    result = await poll(make_provider())

    assert result.ok
    assert part(result, first, "worker-0:gpu") == ()
    assert part(result, second, "worker-0:cpu") == ()
    assert len(exported(result, GPU)) == 2 * 4 * 8 - 8
    assert len(exported(result, CPU)) == 2 * 4 - 1
    # An empty basic reply still says the pod exists; nothing about its phase.
    assert [s.name for s in part(result, second, "worker-1:basic")] == ["training_pod_info"]
    assert all_drops(metrics) == 0


async def test_gpu_without_gpu_name_is_the_pod_aggregate(
    make_provider: Factory, world: AlayaWorld
) -> None:
    job_id = next(iter(world.jobs))
    world.faults.append(AlayaFault("no_gpu_name", job=job_id, pod="worker-2", type="gpu"))
    result = await poll(make_provider())

    (aggregate,) = [s for s in part(result, job_id, "worker-2:gpu") if s.name == GPU]
    assert labels_of(aggregate)["gpu"] == ""
    assert aggregate.label_names == CARD_LABELS


async def test_unparsable_values_are_dropped_and_counted(
    make_provider: Factory, world: AlayaWorld, metrics: SelfMetrics
) -> None:
    job_id = next(iter(world.jobs))
    world.faults.append(AlayaFault("bad_values", job=job_id, pod="worker-1", type="gpu"))
    world.faults.append(AlayaFault("bad_values", job=job_id, pod="worker-1", endpoint="basic"))
    result = await poll(make_provider())

    # Bad values are the upstream's problem, not a failed request.
    assert result.ok
    assert drops(metrics, "unparsable") == 2  # a sample value, and restartCount
    assert drops(metrics, "not_finite") == 2  # maxRate NaN, avgRate Infinity
    assert drops(metrics, "bad_timestamp") == 1
    assert drops(metrics, "invalid_series") == 1
    assert all_drops(metrics) == 6
    got = exported(result, GPU)
    assert len(got) == 2 * 4 * 8
    # Card 0's newest value did not parse: its latest is the sample before.
    times = world.sample_times(T0 - WINDOW_15M, T0)
    card0 = ("alaya", "", "", job_id, "worker-1", "NVIDIA-H800A-NV-80G-0")
    assert got[card0] == world.value(job_id, "worker-1", "gpu", 0, times[-2])
    assert card0 not in exported(result, "training_pod_gpu_utilization_window_max_ratio")
    assert len(exported(result, "training_pod_gpu_utilization_window_max_ratio")) == 63
    assert len(samples(result, "training_pod_restarts")) == 7
    for value in got.values():
        assert 0.0 <= value <= 1.0


async def test_a_reply_of_the_wrong_shape_fails_its_part_only(
    make_provider: Factory, world: AlayaWorld
) -> None:
    job_id = list(world.jobs)[1]
    world.faults.append(AlayaFault("bad_shape", job=job_id, pod="worker-0", type="memory"))
    world.faults.append(AlayaFault("bad_shape", job=job_id, pod="worker-0", endpoint="basic"))
    result = await poll(make_provider())

    assert not result.ok and result.failed_requests == 2
    assert sorted(failed_parts(result)) == [(job_id, "worker-0:basic"), (job_id, "worker-0:memory")]
    assert len(exported(result, MEMORY)) == 7
    assert len(exported(result, GPU)) == 64


async def test_series_carry_the_pod_of_the_path(make_provider: Factory, world: AlayaWorld) -> None:
    world.reply_pod_name = lambda job_id, pod: "pod_name_master"
    result = await poll(make_provider())

    pods = {labels_of(s).get("pod") for s in samples(result)} - {None}
    assert pods == {
        "worker-0",
        "worker-1",
        "worker-2",
        "worker-3",
    }
    assert len(exported(result, GPU)) == 64


async def test_only_owned_jobs_are_polled(
    make_provider: Factory, alaya_sim: Simulator, world: AlayaWorld
) -> None:
    mine = list(world.jobs)[1]
    result = await poll(make_provider(), owns_job=lambda job_id: job_id == mine)

    assert set(result.jobs) == {"", mine}
    assert {e.path.split("/")[4] for e in alaya_sim.log.entries} == {mine}
    assert len(exported(result, GPU)) == 4 * 8


async def test_pod_basic_gives_info_phase_and_restarts(
    make_provider: Factory, world: AlayaWorld
) -> None:
    result = await poll(make_provider())

    job_id = next(iter(world.jobs))
    basic = world.basic(job_id, "worker-3")
    (info,) = [
        s
        for s in samples(result, "training_pod_info")
        if labels_of(s)["pod"] == "worker-3" and labels_of(s)["job_id"] == job_id
    ]
    assert labels_of(info) == {
        "provider": "alaya",
        "resource_pool": "",
        "queue": "",
        "job_id": job_id,
        "pod": "worker-3",
        "replica_type": "",
        "node": basic["hostName"],
        "pod_ip": basic["podIp"],
    }
    phases = {
        labels_of(s)["phase"]: s.value
        for s in samples(result, "training_pod_phase")
        if labels_of(s)["pod"] == "worker-3" and labels_of(s)["job_id"] == job_id
    }
    assert phases["Running"] == 1 and sum(phases.values()) == 1
    restarts = {
        (labels_of(s)["job_id"], labels_of(s)["pod"]): s.value
        for s in samples(result, "training_pod_restarts")
    }
    assert len(restarts) == 8
    assert restarts[(job_id, "worker-3")] == basic["restartCount"]


async def test_pod_details_off_skips_basic(make_provider: Factory, alaya_sim: Simulator) -> None:
    result = await poll(make_provider(pod_details=False, types=["gpu"]))

    assert alaya_sim.log.count("basic") == 0
    assert alaya_sim.log.count("gpu-metrics") == 8
    assert samples(result, "training_pod_info") == []
    assert len(exported(result, GPU)) == 64


async def test_describe_names_no_secret(make_provider: Factory) -> None:
    provider = make_provider()
    facts = provider.describe()
    assert facts["jobs"] == "2" and facts["pods"] == "8"
    assert facts["window"] == "period 15m"
    assert DEMO_API_KEY not in str(facts)


class ListedJobs:
    """A job source other than the configuration, as a list endpoint would be."""

    def __init__(self, jobs: list[JobTarget] | None) -> None:
        # None: the list endpoint fails.
        self.listed = jobs

    async def jobs(self, context: PollContext) -> Sequence[JobTarget]:
        if self.listed is None:
            raise ApiError("jobs", "500", "simulated list failure")
        return self.listed

    def describe(self) -> dict[str, str]:
        return {"discovery": "listed"}

    async def close(self) -> None:
        return None


async def test_another_job_source_plugs_in(
    alaya_url: str, alaya_sim: Simulator, world: AlayaWorld, metrics: SelfMetrics
) -> None:
    job_id = list(world.jobs)[1]
    source = ListedJobs([JobTarget(job_id, ("worker-3",))])
    target = make_target(alaya_url, world, jobs=[])
    provider = AlayaProvider(target, metrics, tier_plan(target, 60.0), jobs=source)
    try:
        result = await poll(provider)
        assert result.ok
        assert {labels_of(s)["pod"] for s in samples(result, GPU)} == {"worker-3"}
        assert alaya_sim.log.count() == CALLS_PER_POD
        assert provider.describe()["discovery"] == "listed"

        source.listed = None
        failed = await poll(provider)
    finally:
        await provider.close()
    # A list that cannot be read: nothing is known to be gone, the previous jobs carry over.
    assert not failed.listed and failed.failed_requests == 1
    bounds = {"fast": 600.0, "medium": 600.0}
    first = merge(TargetSnapshot.empty("alaya", "t"), result.update(), T0, bounds).snapshot
    carried = merge(first, failed.update(), T0 + 60, bounds).snapshot
    assert set(carried.jobs) == {"", job_id}


async def test_transport_faults_are_retried_and_counted(
    make_provider: Factory, alaya_sim: Simulator, metrics: SelfMetrics
) -> None:
    # The simulator's shared faults: a truncated body, a proxy's HTML page, a body of the
    # wrong shape and a 503, each on one request. (A reset connection is left out: aiohttp
    # itself resends an idempotent GET once, so no attempt of ours sees it.)
    alaya_sim.faults.script.extend(["malformed", "html", "wrong_types", 503])
    result = await poll(make_provider(limits=Limits(requests_per_second=0, retries=3)))

    assert result.ok
    codes = {
        code: requests(metrics, "gpu-metrics", code) + requests(metrics, "basic", code)
        for code in ("error", "502", "503")
    }
    assert codes == {"error": 2, "502": 1, "503": 1}
    assert len(exported(result, GPU)) == 64
