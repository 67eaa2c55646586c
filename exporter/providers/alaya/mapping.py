"""From Alaya replies to samples of the metric contract (`exporter.metrics`).

Decisions the API pages leave open, made here:

- Series carry the pod named in the request path (what the user configured), not the reply's
  `podName`, which may differ (`pod_name_master` for `worker-0` in the documented example).
- gpu / vram elements are per card: the `gpu` label is `gpuName`. An element without
  `gpuName` (the page says cards are a possible breakdown, not a promise) is the pod's
  aggregate and gets `gpu=""`, so the family keeps one label set. cpu / memory are per pod
  and never carry `gpu`.
- `training_pod_*_utilization_ratio` is the value of the newest sample in `metricData` (by
  timestamp); only when no sample parses does it fall back to `currentRate`, which the page
  describes as the same thing ("the ratio of the most recent sample").
- Numbers follow the kit's rules (`exporter.providers.kit.numbers`): a value that is not a
  finite number, or a ratio outside [0, 1], is dropped and counted (`drop(reason)`); the rest
  of the reply is kept. A sample whose value is out of range does not count as the newest.
  Two elements that would make the same series keep the first.
- Every label value goes through the kit's `label()` (bounded, so a 100,000-character
  `gpuName` is not exported verbatim), and the phase state set is the provider's `Seen` of
  every phase so far.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from exporter.metrics import (
    KNOWN_JOB_STATUSES,
    KNOWN_POD_PHASES,
    SPEC_BY_NAME,
)
from exporter.model import CARD_LABELS, JOB_LABELS, POD_LABELS, TARGET_LABELS, Sample
from exporter.providers.alaya.models import (
    JobRecord,
    MetricsData,
    PodBasic,
    Point,
    RawNumber,
    Series,
    valid_items,
)
from exporter.providers.alaya.target import METRIC_BY_TYPE, NAME
from exporter.providers.kit import numbers
from exporter.providers.kit.labels import label
from exporter.providers.kit.numbers import (
    BAD_TIMESTAMP,
    DUPLICATE_SERIES,
    INVALID_SAMPLE,
    INVALID_SERIES,
    OUT_OF_RANGE,
    UNPARSABLE,
    Drop,
    in_range,
)
from exporter.providers.kit.states import fold, with_current

PER_CARD_TYPES = frozenset({"gpu", "vram"})
QUERY_WINDOW = "training_alaya_query_window_seconds"
LAST_SAMPLE = "training_pod_last_sample_timestamp_seconds"


@dataclass(frozen=True, slots=True)
class PodKey:
    job_id: str
    pod: str
    # The pod labels' values, made once: every sample of the pod starts with them.
    labels: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # resource_pool and queue: Alaya has neither.
        labels = (NAME, "", "", label(self.job_id), label(self.pod))
        object.__setattr__(self, "labels", labels)


@dataclass(slots=True)
class MappedMetrics:
    samples: tuple[Sample, ...]
    # Unix seconds of the newest valid sample in the reply, None when it had none.
    newest_timestamp: float | None
    # `podName`s of the reply that differ from the pod in the path.
    other_pod_names: set[str] = field(default_factory=set)


def window_names(metric_type: str) -> tuple[str, str, str]:
    """(latest, window max, window avg) sample names of an Alaya type."""
    latest = METRIC_BY_TYPE[metric_type]
    base = latest.removesuffix("_ratio")
    return latest, f"{base}_window_max_ratio", f"{base}_window_avg_ratio"


def parse_number(raw: RawNumber, drop: Drop) -> float | None:
    """A finite float, or None: absent (not counted) or invalid (counted by reason)."""
    if raw is None:
        return None
    return numbers.number(raw, drop)


def newest_point(
    points: Iterable[Point | None], drop: Drop, name: str = ""
) -> tuple[float, float] | None:
    """(timestamp, value) of the newest point whose timestamp and value both parse (and that
    family `name` can take)."""
    newest: tuple[float, float] | None = None
    for point in points:
        if point is None:
            drop(INVALID_SAMPLE)
            continue
        when = numbers.timestamp(point.timestamp, drop)
        if when is None:
            continue
        if point.value is None:
            drop(UNPARSABLE)
            continue
        value = in_range(name, parse_number(point.value, drop), drop)
        if value is None:
            continue
        if newest is None or when >= newest[0]:
            newest = (when, value)
    return newest


def metric_samples(key: PodKey, metric_type: str, data: MetricsData, drop: Drop) -> MappedMetrics:
    """Samples of one gpu-metrics reply for `key`'s pod and one `type`."""
    per_card = metric_type in PER_CARD_TYPES
    label_names = CARD_LABELS if per_card else POD_LABELS
    samples: list[Sample] = []
    seen: set[tuple[str, ...]] = set()
    newest: float | None = None
    others: set[str] = set()
    for series in valid_items(Series, data.series):
        if series is None:
            drop(INVALID_SERIES)
            continue
        if series.pod_name and series.pod_name != key.pod:
            others.add(series.pod_name)
        label_values = (*key.labels, label(series.gpu_name or "")) if per_card else key.labels
        if label_values in seen:
            drop(DUPLICATE_SERIES)
            continue
        seen.add(label_values)
        values, when = _series_values(metric_type, series, drop)
        samples.extend(Sample(n, label_names, label_values, v) for n, v in values)
        if when is not None:
            newest = when if newest is None else max(newest, when)
    return MappedMetrics(tuple(samples), newest, others)


def _series_values(
    metric_type: str, series: Series, drop: Drop
) -> tuple[list[tuple[str, float]], float | None]:
    """(sample name, value) of the latest, max and avg gauges, and the newest sample time."""
    latest_name, max_name, avg_name = window_names(metric_type)
    point = newest_point(valid_items(Point, series.points), drop, latest_name)
    if point is not None:
        latest: float | None = point[1]
    else:
        latest = in_range(latest_name, parse_number(series.current_rate, drop), drop)
    candidates = (
        (latest_name, latest),
        (max_name, in_range(max_name, parse_number(series.max_rate, drop), drop)),
        (avg_name, in_range(avg_name, parse_number(series.avg_rate, drop), drop)),
    )
    values = [(name, value) for name, value in candidates if value is not None]
    return values, point[0] if point is not None else None


def last_sample(key: PodKey, timestamp: float) -> Sample:
    return Sample(LAST_SAMPLE, POD_LABELS, key.labels, timestamp)


def query_window(target: str, seconds: float) -> Sample:
    return Sample(QUERY_WINDOW, TARGET_LABELS, (NAME, target), seconds)


def basic_samples(
    key: PodKey, basic: PodBasic, drop: Drop, phases: Sequence[str] = KNOWN_POD_PHASES
) -> tuple[Sample, ...]:
    """training_pod_info / _phase / _restarts from a pod's basic reply; `phases` is the state
    set (every phase seen so far; the pod's own is added when it is not there)."""
    info = SPEC_BY_NAME["training_pod_info"].labels
    node = basic.host_name or basic.host_ip or ""
    samples = [
        Sample(
            "training_pod_info",
            info,
            # Alaya names no replica type; the node is its host name, else its host IP.
            (*key.labels, "", label(node), label(basic.pod_ip or "")),
            1.0,
        )
    ]
    if basic.status:
        status = fold(phases, basic.status)
        phase_labels = SPEC_BY_NAME["training_pod_phase"].labels
        samples.extend(
            Sample(
                "training_pod_phase",
                phase_labels,
                (*key.labels, label(phase)),
                float(phase == status),
            )
            for phase in with_current(phases, status)
        )
    restarts = numbers.non_negative(parse_number(basic.restart_count, drop), drop)
    if restarts is not None:
        samples.append(Sample("training_pod_restarts", POD_LABELS, key.labels, restarts))
    return tuple(samples)


# Job-level samples of list discovery. Alaya's job list is not documented and its status
# spelling unknown (a client of the same gateway's instance list filters on RUNNING), so a
# status equal to a known one but for case is exported in the known spelling, which the
# alerts and the dashboard match.
JOB_STATUS_BY_FOLDED = {s.casefold(): s for s in KNOWN_JOB_STATUSES}
MAX_JOB_LABEL = 1024


def job_status(raw: str | None) -> str:
    text = label(raw or "")
    return JOB_STATUS_BY_FOLDED.get(text.casefold(), text)


def local_time(raw: object, zone: ZoneInfo, drop: Drop) -> float | None:
    """`YYYY-MM-DD HH:MM:SS` in `zone` as unix seconds; None when absent or unparsable."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        drop(BAD_TIMESTAMP)
        return None
    try:
        moment = datetime.strptime(raw.strip()[:19].replace("T", " "), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        drop(BAD_TIMESTAMP)
        return None
    return moment.replace(tzinfo=zone).timestamp()


def job_samples(
    record: JobRecord, zone: ZoneInfo, drop: Drop, statuses: Sequence[str] = KNOWN_JOB_STATUSES
) -> tuple[Sample, ...]:
    """Info, status state set, created / finished times and replicas of one listed job;
    `statuses` is the state set (the provider's `Seen`, which folds past its cap)."""
    labels = (NAME, "", "", label(record.id))
    status = fold(statuses, job_status(record.status))
    info = SPEC_BY_NAME["training_job_info"].labels
    # Alaya names no job type, priority, user or image.
    samples = [
        Sample("training_job_info", info, (*labels, label(record.name or ""), *[""] * 4), 1.0)
    ]
    status_labels = SPEC_BY_NAME["training_job_status"].labels
    samples.extend(
        Sample("training_job_status", status_labels, (*labels, s), float(s == status))
        for s in with_current(statuses, status)
    )
    created = local_time(record.created_time, zone, drop)
    if created is not None:
        samples.append(
            Sample("training_job_created_timestamp_seconds", JOB_LABELS, labels, created)
        )
    finished = local_time(record.finished_time, zone, drop)
    if finished is not None:
        samples.append(
            Sample("training_job_finished_timestamp_seconds", JOB_LABELS, labels, finished)
        )
    workers = worker_count(record, drop)
    if workers is not None:
        samples.append(Sample("training_job_replicas", JOB_LABELS, labels, float(workers)))
    return tuple(samples)


def worker_count(record: JobRecord, drop: Drop) -> int | None:
    raw = record.resource.worker_count if record.resource is not None else None
    value = parse_number(raw, drop)
    if value is None:
        return None
    if value < 0:
        drop(OUT_OF_RANGE)
        return None
    if value != int(value):
        drop(UNPARSABLE)
        return None
    return int(value)


def pattern_pods(pattern: str, record: JobRecord, workers: int) -> tuple[str, ...]:
    """Pod names from the user's `pod_pattern` over the job's workers (0-based index)."""
    if not pattern:
        return ()
    name = record.name or ""
    return tuple(
        dict.fromkeys(
            _bounded(pattern.format(name=name, id=record.id, index=i), 253) for i in range(workers)
        )
    )


def _bounded(text: str, limit: int = MAX_JOB_LABEL) -> str:
    return text[:limit].encode("utf-8", "replace").decode("utf-8")
