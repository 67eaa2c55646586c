"""The mapping never raises and never exports a non-finite value, whatever the reply holds."""

from __future__ import annotations

import math
from typing import Any
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.metrics import SPEC_BY_NAME
from exporter.providers.alaya.mapping import (
    PodKey,
    basic_samples,
    job_samples,
    metric_samples,
    pattern_pods,
)
from exporter.providers.alaya.models import JobRecord, MetricsData, PodBasic
from exporter.providers.kit.numbers import DROP_REASONS

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["0.5", "NaN", "inf", "-Infinity", "1e400", " 0.25 ", "", "0x10", "1_0"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
point = st.one_of(junk, st.fixed_dictionaries({"timestamp": junk, "value": junk}))
element = st.one_of(
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "type": junk,
            "podName": st.sampled_from(["worker-0", "pod_name_master"]),
            "maxRate": junk,
            "avgRate": junk,
            "currentRate": junk,
            "gpuName": st.sampled_from(["NVIDIA-H800A-NV-80G-0", "NVIDIA-H800A-NV-80G-1", ""]),
            "metricData": st.one_of(junk, st.lists(point, max_size=5)),
        },
    ),
)


def data_of(raw: Any) -> MetricsData | None:
    try:
        return MetricsData.model_validate(raw)
    except ValueError:
        return None  # the client turns this into a failed part


@settings(max_examples=300, deadline=None)
@given(
    series=st.one_of(junk, st.lists(element, max_size=6)),
    metric_type=st.sampled_from(["gpu", "vram", "cpu", "memory"]),
)
def test_any_metrics_reply_maps_without_raising(series: Any, metric_type: str) -> None:
    data = data_of({"metricData": series})
    if data is None:
        return
    reasons: list[str] = []
    mapped = metric_samples(PodKey("job", "worker-0"), metric_type, data, reasons.append)

    seen = set()
    for sample in mapped.samples:
        assert math.isfinite(sample.value)
        assert sample.name in SPEC_BY_NAME
        # Every Alaya family is a 0-1 ratio: anything else was dropped as out_of_range.
        assert 0.0 <= sample.value <= 1.0
        assert dict(zip(sample.label_names, sample.label_values, strict=True))["pod"] == "worker-0"
        assert (sample.name, sample.label_values) not in seen, "duplicate series"
        seen.add((sample.name, sample.label_values))
    if mapped.newest_timestamp is not None:
        assert math.isfinite(mapped.newest_timestamp) and mapped.newest_timestamp > 0
    assert set(reasons) <= set(DROP_REASONS)


# A pod's basic reply has five optional keys: 100 examples reach every branch of the mapping
# that 200 do (line arcs, traced under the CI profile).
@settings(max_examples=100, deadline=None)
@given(
    basic=st.fixed_dictionaries(
        {},
        optional={
            "status": st.one_of(st.none(), st.sampled_from(["Running", "Evicted", ""])),
            "restartCount": junk,
            "hostIp": st.one_of(st.none(), st.text(max_size=6)),
            "podIp": st.one_of(st.none(), st.text(max_size=6)),
            "hostName": st.one_of(st.none(), st.text(max_size=6)),
        },
    )
)
def test_any_basic_reply_maps_without_raising(basic: dict[str, Any]) -> None:
    samples = basic_samples(
        PodKey("job", "worker-0"), PodBasic.model_validate(basic), lambda r: None
    )

    assert samples[0].name == "training_pod_info"
    phases = [s for s in samples if s.name == "training_pod_phase"]
    if basic.get("status"):
        assert sum(s.value for s in phases) == 1
        assert basic["status"] in {s.label_values[-1] for s in phases}
    else:
        assert phases == []
    assert all(math.isfinite(s.value) for s in samples)


ZONE = ZoneInfo("Asia/Shanghai")
REASONS = set(DROP_REASONS)


@settings(max_examples=300, deadline=None)
@given(
    record=st.fixed_dictionaries(
        {"id": st.sampled_from(["job-1", 42])},
        optional={
            "name": st.one_of(st.none(), st.text(max_size=6)),
            "status": st.one_of(st.none(), st.sampled_from(["RUNNING", "failed", "Queuing", ""])),
            "aidcId": junk,
            "resource": st.one_of(st.none(), st.fixed_dictionaries({"workerCount": junk})),
            "createdTime": st.one_of(junk, st.sampled_from(["2025-09-10 12:00:00", "soon"])),
            "endTime": junk,
            "finishTime": st.one_of(junk, st.just("2025-09-10T13:00:00")),
        },
    )
)
def test_any_job_record_maps_without_raising(record: dict[str, Any]) -> None:
    try:
        parsed = JobRecord.model_validate(record)
    except ValueError:
        return  # the listing drops and counts it
    reasons: list[str] = []
    samples = job_samples(parsed, ZONE, reasons.append)
    assert samples[0].name == "training_job_info"
    assert all(math.isfinite(s.value) and s.name in SPEC_BY_NAME for s in samples)
    statuses = [s for s in samples if s.name == "training_job_status"]
    assert sum(s.value for s in statuses) == (1 if record.get("status") else 0)
    assert len({s.label_values for s in statuses}) == len(statuses)
    assert set(reasons) <= REASONS
    pods = pattern_pods("{name}-worker-{index}", parsed, 3)
    assert len(pods) == len(set(pods)) and all(len(p) <= 253 for p in pods)


def test_a_job_record_in_the_known_spelling_and_beijing_time() -> None:
    record = JobRecord.model_validate(
        {
            "id": 7,
            "name": "llama3-8b-sft",
            "status": "FAILED",
            "resource": {"workerCount": "3"},
            "createdTime": "2025-09-10 12:00:00",
            "finishTime": "2025-09-10 18:13:20",
        }
    )
    reasons: list[str] = []
    by_name = {s.name: s for s in job_samples(record, ZONE, reasons.append) if s.value}
    assert by_name["training_job_info"].label_values == (
        "alaya",
        "",
        "",
        "7",
        "llama3-8b-sft",
        "",
        "",
        "",
        "",
    )
    assert by_name["training_job_status"].label_values[-1] == "Failed"
    assert by_name["training_job_created_timestamp_seconds"].value == 1_757_476_800
    assert by_name["training_job_finished_timestamp_seconds"].value == 1_757_499_200
    assert by_name["training_job_replicas"].value == 3
    assert pattern_pods("{name}-worker-{index}", record, 2) == (
        "llama3-8b-sft-worker-0",
        "llama3-8b-sft-worker-1",
    )
    # A status no known one matches keeps its own series beside the known ones.
    queued = JobRecord.model_validate(
        {"id": "j", "status": "QUEUING", "resource": {"workerCount": 1.5}}
    )
    statuses = {
        s.label_values[-1]: s.value
        for s in job_samples(queued, ZONE, reasons.append)
        if s.name == "training_job_status"
    }
    assert statuses["QUEUING"] == 1 and statuses["Running"] == 0
    assert reasons == ["unparsable"]
