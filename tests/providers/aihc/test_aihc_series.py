"""What a job's series state keeps: three doubles a (pod, metric type) series, one dict of pod
slots for the job, not a dict per metric type, and one tuple of label rows for its types."""

from __future__ import annotations

import gc
import tracemalloc
from functools import partial

from exporter.model import Samples, Shape
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import DescribeJobMetricsReply, MetricPoint, PodSeries
from exporter.providers.aihc.series import JobSeries
from exporter.providers.aihc.target import AIHC_METRIC_TYPES
from exporter.selfmetrics import SelfMetrics

# 3,520 series: a job's own dicts and set are shared by its 176, so the average per series is
# the same as over more jobs (47.7 B over 100 jobs, 48.0 B over 20).
JOBS, PODS = 20, 8


def test_a_series_costs_about_its_three_doubles() -> None:
    drop = partial(SelfMetrics().drop, "aihc")
    pods = [f"job-pod-{p}" for p in range(PODS)]
    replies = {
        t: DescribeJobMetricsReply(
            tuple(PodSeries(p, (MetricPoint("1700000000", "42.5"),)) for p in pods), {}
        )
        for t in AIHC_METRIC_TYPES
    }
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        jobs = [JobSeries("percent", drop) for _ in range(JOBS)]
        for k, state in enumerate(jobs):
            state.pods = set(pods)
            who = JobIdentity("pool", "default", f"job-{k}")
            for metric_type, reply in replies.items():
                state.add_reply(metric_type, who, reply)
        gc.collect()
        per_series = (tracemalloc.get_traced_memory()[0] - base) / (
            JOBS * PODS * len(AIHC_METRIC_TYPES)
        )
    finally:
        tracemalloc.stop()
    # 24 B of doubles, an array a metric type (64 B: 8 B a series), the job's dicts and set
    # shared by its 176 series (~17 B): ~50 B; and the shape of each type's samples, which
    # the store's samples share (a Shape and its dict entry, ~110 B: 14 B a series): ~65 B.
    # Arrays left with the room they grew into: ~73 B; a dict of slots per metric type: ~104 B;
    # label rows made for each type, not shared: ~150 B.
    assert per_series < 68, f"{per_series:.0f} B a series"


def test_a_time_past_any_float_is_a_bad_timestamp_and_the_rest_is_kept() -> None:
    """An integer time too large for a float is dropped as `bad_timestamp`, as a string one
    is: it does not fail the reply (float() of it would raise)."""
    reasons: list[str] = []
    state = JobSeries("percent", reasons.append)
    points = (MetricPoint(10**400, "0.5"), MetricPoint(-5, "0.5"), MetricPoint(1700000000, "0.5"))
    reply = DescribeJobMetricsReply((PodSeries("job-pod-0", points),), {})
    metric_type = AIHC_METRIC_TYPES[0]
    (sample,) = state.add_reply(metric_type, JobIdentity("pool", "default", "job-0"), reply)
    assert reasons == ["bad_timestamp", "bad_timestamp"]
    assert state.newest == {"job-pod-0": 1700000000.0}
    assert sample.label_values[-1] == "job-pod-0"


def test_types_with_different_pods_keep_their_shapes_reply_after_reply() -> None:
    """A job whose types have different pods (a launcher without GPUs, say): each type's
    samples keep one shape from reply to reply (the renderer keeps their lines), and types
    with the same pods share one tuple of label rows."""
    state = JobSeries("percent", lambda reason: None)
    who = JobIdentity("pool", "default", "job-0")
    pods = [f"job-0-pod-{p}" for p in range(3)]
    state.pods = set(pods)
    wanted = {"GpuUsage": pods[1:], "CpuUsage": pods, "MemoryUsage": pods}
    shapes: dict[str, Shape] = {}
    for at in range(1700000000, 1700000050, 5):
        for metric_type, present in wanted.items():
            series = tuple(PodSeries(p, (MetricPoint(at, "50"),)) for p in present)
            samples = state.add_reply(metric_type, who, DescribeJobMetricsReply(series, {}))
            assert isinstance(samples, Samples)
            assert shapes.setdefault(metric_type, samples.shape) is samples.shape
            assert [s.label_values[-1] for s in samples] == present
    assert shapes["CpuUsage"].label_values is shapes["MemoryUsage"].label_values
