"""The mapping never raises and never exports a non-finite value, whatever the reply holds."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.metrics import SPEC_BY_NAME
from exporter.providers.alaya.mapping import PodKey, basic_samples, metric_samples
from exporter.providers.alaya.models import MetricsData, PodBasic
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


@settings(max_examples=200, deadline=None)
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
