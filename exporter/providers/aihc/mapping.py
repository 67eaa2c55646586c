"""From AIHC reply models to samples of the metric contract (`exporter.metrics`).

Pure functions: no I/O, no state. Every upstream number is parsed here, one at a time, by the
kit's rules (`exporter.providers.kit.numbers`); one that is not a usable number is reported
through `drop(reason)` and left out, and the rest of the reply is kept. Every label value goes
through the kit's `label()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

from exporter.model import JOB_LABELS, POD_LABELS, Sample, Shape, new_sample
from exporter.providers.aihc.models import Event, Job, Pod, RawNumber
from exporter.providers.aihc.target import METRIC_BY_TYPE, NAME, USAGE_TYPES
from exporter.providers.kit.labels import MAX_LABEL_LENGTH, label
from exporter.providers.kit.numbers import (
    BAD_TIMESTAMP,
    NOT_FINITE,
    OUT_OF_RANGE,
    UNPARSABLE,
    Drop,
    in_range,
    non_negative,
    number,
    parse_number,
    scaled,
)
from exporter.providers.kit.states import fold, with_current

__all__ = [
    "BAD_TIMESTAMP",
    "MAX_LABEL_LENGTH",
    "NOT_FINITE",
    "OUT_OF_RANGE",
    "UNPARSABLE",
    "label",
    "number",
    "parse_number",
]


# Job-wide figures that live DescribeJobs / DescribeJob replies carry beyond the documented
# response tables (reported from a live pool, August 2026): free with the list.
JOB_GPU_UTILIZATION = "training_job_gpu_utilization_ratio"
JOB_GPU_MEMORY_UTILIZATION = "training_job_gpu_memory_utilization_ratio"
JOB_RUNNING_SECONDS = "training_job_running_seconds"

# Go's time.String(): `2024-07-15 16:52:50 +0000 UTC`, maybe with fractional seconds.
_GO_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?\s*([+-]\d{2}):?(\d{2})?"
    r"(?:\s+\S+)?(?:\s+m=[+-][\d.]+)?"
)


def parse_rfc3339(text: str) -> float | None:
    """`2025-05-13T02:28:26Z` (or with an offset / fraction) as unix seconds."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def parse_event_time(text: str) -> float | None:
    """`2024-07-15 16:52:50 +0000 UTC` (Go's time format), or RFC 3339, as unix seconds."""
    match = _GO_TIME.fullmatch(text.strip())
    if match is None:
        return parse_rfc3339(text) if text.strip() else None
    year, month, day, hour, minute, second, fraction, off_h, off_m = match.groups()
    sign = -1 if off_h.startswith("-") else 1
    offset = timedelta(hours=abs(int(off_h)), minutes=int(off_m or 0))
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            tzinfo=timezone(sign * offset),
        )
    except ValueError:
        return None
    return moment.timestamp() + (float(f"0.{fraction}") if fraction else 0.0)


def _timestamp(text: str, drop: Drop) -> float | None:
    if not text.strip():
        return None
    value = parse_rfc3339(text)
    if value is None:
        drop(BAD_TIMESTAMP)
    return value


@dataclass(frozen=True, slots=True)
class JobIdentity:
    resource_pool: str
    queue: str
    job_id: str
    # The job labels' values, made once: every sample of the job starts with them.
    values: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = (NAME, label(self.resource_pool), label(self.queue), label(self.job_id))
        object.__setattr__(self, "values", labels)


def job_sample(name: str, who: JobIdentity, value: float, **extra: str) -> Sample:
    return Sample(
        name,
        (*JOB_LABELS, *extra),
        (*who.values, *(label(v) for v in extra.values())),
        value,
    )


def pod_values(who: JobIdentity, pod: str) -> tuple[str, ...]:
    """The label values (`POD_LABELS`) of a sample of `pod` of the job `who`."""
    return (*who.values, label(pod))


def pod_type_samples(
    metric_type: str, values: Iterable[tuple[tuple[str, ...], float]]
) -> tuple[Sample, ...]:
    """`metric_type`'s samples of (pod label values, `pod_values()`, value) pairs."""
    name = METRIC_BY_TYPE[metric_type]
    return tuple(new_sample((name, POD_LABELS, labels, value)) for labels, value in values)


LAST_SAMPLE: Final = "training_pod_last_sample_timestamp_seconds"
# The name and label-name columns of a shape, per metric type (and the last sample's): one
# tuple each for all jobs.
_NAMES: Final = {t: (name,) for t, name in METRIC_BY_TYPE.items()} | {LAST_SAMPLE: (LAST_SAMPLE,)}
_POD_LABEL_NAMES: Final = (POD_LABELS,)


def pod_shape(kind: str, labels: tuple[tuple[str, ...], ...]) -> Shape:
    """The shape of the samples of a metric type (or LAST_SAMPLE) of pods whose label values
    (`pod_values()`) are `labels`: what the store keeps them as (`exporter.model.Samples`)."""
    return Shape(_NAMES[kind], _POD_LABEL_NAMES, labels)


def _job_states(
    name: str, who: JobIdentity, label_name: str, states: Sequence[str], current: str
) -> list[Sample]:
    """A job's state set: one sample a state (`with_current`), 1 for `current`, else 0.
    What `job_sample` makes of each, with the label names made once for the set: a round
    makes one set a listed job."""
    names = (*JOB_LABELS, label_name)
    job = who.values
    return [
        new_sample((name, names, (*job, label(s)), 1.0 if s == current else 0.0))
        for s in with_current(states, current)
    ]


def _pod_sample(name: str, who: JobIdentity, pod: str, value: float, **extra: str) -> Sample:
    if not extra:
        # Most samples: every resource point and last-sample time (16 of a read's).
        return new_sample((name, POD_LABELS, pod_values(who, pod), value))
    return Sample(
        name,
        (*POD_LABELS, *extra),
        (*who.values, label(pod), *(label(v) for v in extra.values())),
        value,
    )


def job_samples(
    job: Job, who: JobIdentity, statuses: Sequence[str], drop: Drop
) -> tuple[Sample, ...]:
    """Info, status state set, created/finished timestamps and replicas of one listed job: what
    a listing seldom changes (its usage, which changes every listing, is `job_usage_samples`)."""
    samples = [
        job_sample(
            "training_job_info",
            who,
            1.0,
            job_name=job.name,
            job_type=job.job_type,
            priority=job.priority,
            user_id=job.user_id,
            image=job.job_spec.image,
        )
    ]
    status = fold(statuses, job.status)
    samples += _job_states("training_job_status", who, "status", statuses, status)
    created = _timestamp(job.created_at, drop)
    if created is not None:
        samples.append(job_sample("training_job_created_timestamp_seconds", who, created))
    finished = _timestamp(job.finished_at, drop)
    if finished is not None:
        samples.append(job_sample("training_job_finished_timestamp_seconds", who, finished))
    if job.job_spec.replicas is not None:
        replicas = number(job.job_spec.replicas, drop)
        if replicas is not None:
            samples.append(job_sample("training_job_replicas", who, replicas))
    return tuple(samples)


def job_usage_samples(job: Job, who: JobIdentity, drop: Drop) -> tuple[Sample, ...]:
    """The job-wide GPU and GPU memory utilisation and run time a listed job carries, where it
    carries them: absent, no series; unparsable or out of range, no series and counted."""
    samples = []
    for name, raw in (
        (JOB_GPU_UTILIZATION, job.gpu_utilization_percent),
        (JOB_GPU_MEMORY_UTILIZATION, job.gpu_memory_utilization_percent),
    ):
        if raw is not None:
            percent = number(raw, drop)
            ratio = in_range(name, None if percent is None else scaled(percent, 100), drop)
            if ratio is not None:
                samples.append(job_sample(name, who, ratio))
    if job.run_time_nanoseconds is not None:
        nanoseconds = non_negative(number(job.run_time_nanoseconds, drop), drop)
        if nanoseconds is not None:
            seconds = scaled(nanoseconds, 1_000_000_000)
            samples.append(job_sample(JOB_RUNNING_SECONDS, who, seconds))
    return tuple(samples)


def pod_phase(pod: Pod) -> str:
    return pod.pod_phase or pod.status


def unique_pods(pods: Iterable[Pod]) -> list[Pod]:
    """Pods by name, first occurrence kept: a duplicate series would break the exposition."""
    seen: dict[str, Pod] = {}
    for pod in pods:
        seen.setdefault(pod.name, pod)
    return list(seen.values())


def pod_samples(
    pods: Sequence[Pod], who: JobIdentity, phases: Sequence[str], drop: Drop
) -> tuple[Sample, ...]:
    """Info, phase state set and restarts of each pod of a job."""
    samples: list[Sample] = []
    for pod in pods:
        samples.append(
            _pod_sample(
                "training_pod_info",
                who,
                pod.name,
                1.0,
                replica_type=pod.replica_type,
                node=pod.node_name,
                pod_ip=pod.pod_ip,
            )
        )
        current = fold(phases, pod_phase(pod))
        samples += [
            _pod_sample("training_pod_phase", who, pod.name, 1.0 if p == current else 0.0, phase=p)
            for p in with_current(phases, current)
        ]
        if pod.restart_count is not None:
            restarts = number(pod.restart_count, drop)
            if restarts is not None:
                samples.append(_pod_sample("training_pod_restarts", who, pod.name, restarts))
    return tuple(samples)


def resource_reader(
    metric_type: str, usage_unit: str, drop: Drop
) -> Callable[[RawNumber], float | None]:
    """A reader of one metric type's points in `usage_unit`, looked up once for a reply's
    points: a point's value in the exported unit (usage percentages become ratios), or None
    (counted) when it is not a number the metric can take (a utilisation outside 0-1)."""
    name = METRIC_BY_TYPE[metric_type]
    percent = metric_type in USAGE_TYPES and usage_unit == "percent"

    def read(raw: RawNumber) -> float | None:
        value = number(raw, drop)
        if value is None:
            return None
        return in_range(name, scaled(value, 100) if percent else value, drop)

    return read


# Kubernetes' event types; any other type is exported as `other`.
EVENT_TYPES: Final = frozenset({"Normal", "Warning"})
# Distinct reasons exported per job and type, the most frequent; the rest are summed as `other`.
MAX_EVENT_REASONS: Final = 32
OTHER: Final = "other"
# Told a label's values summed as `other`: (label, raw values).
Folded = Callable[[str, frozenset[str]], None]


def event_samples(
    events: Iterable[Event],
    who: JobIdentity,
    drop: Drop,
    folded: Folded = lambda label, values: None,
) -> tuple[Sample, ...]:
    """Event counts summed, and the newest lastTimestamp, per (type, reason): types outside
    EVENT_TYPES as `other`, and past MAX_EVENT_REASONS reasons of one type, the least frequent
    summed as reason `other` (each told to `folded` with its label, raw), so a job's events
    make a bounded number of series."""
    counts, newest, types = _event_counts(events, drop)
    folded("event_type", types)
    counts, newest = _fold_reasons(counts, newest, folded)
    return tuple(_event_series(counts, newest, who))


def _event_series(
    counts: Mapping[tuple[str, str], float],
    newest: Mapping[tuple[str, str], float],
    who: JobIdentity,
) -> list[Sample]:
    samples = []
    for (event_type, reason), total in sorted(counts.items()):
        labels = {"event_type": event_type, "reason": reason}
        samples.append(job_sample("training_job_events_total", who, total, **labels))
        at = newest.get((event_type, reason))
        if at is not None:
            name = "training_job_last_event_timestamp_seconds"
            samples.append(job_sample(name, who, at, **labels))
    return samples


def _event_counts(
    events: Iterable[Event], drop: Drop
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float], frozenset[str]]:
    """Counts and newest times per (type, reason), types outside EVENT_TYPES as `other`;
    and those types, raw."""
    counts: dict[tuple[str, str], float] = {}
    newest: dict[tuple[str, str], float] = {}
    types: set[str] = set()
    for event in events:
        if event.type not in EVENT_TYPES:
            types.add(event.type)
        key = (event.type if event.type in EVENT_TYPES else OTHER, event.reason)
        if event.count is None:
            # An event object exists, so it happened at least once.
            count: float | None = 1.0
        else:
            count = non_negative(number(event.count, drop), drop)
        counts[key] = counts.get(key, 0.0) + (count or 0.0)
        text = event.last_timestamp or event.first_timestamp
        at = parse_event_time(text) if text else None
        if text and at is None:
            drop(BAD_TIMESTAMP)
        if at is not None:
            newest[key] = max(at, newest.get(key, at))
    return counts, newest, frozenset(types)


def _fold_reasons(
    counts: dict[tuple[str, str], float],
    newest: dict[tuple[str, str], float],
    folded: Folded,
) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """`counts` and `newest` with at most MAX_EVENT_REASONS reasons per type (the most
    frequent, then by name), the rest summed (and their newest time) under reason `other`."""
    ranked = sorted(counts, key=lambda k: (-counts[k], k))
    kept: dict[tuple[str, str], float] = {}
    times: dict[tuple[str, str], float] = {}
    per_type: dict[str, int] = {}
    gone: set[str] = set()
    for key in ranked:
        event_type, reason = key
        per_type[event_type] = per_type.get(event_type, 0) + 1
        into = key
        if per_type[event_type] > MAX_EVENT_REASONS:
            into = (event_type, OTHER)
            gone.add(reason)
        kept[into] = kept.get(into, 0.0) + counts[key]
        if key in newest:
            times[into] = max(newest[key], times.get(into, newest[key]))
    folded("reason", frozenset(gone))
    return kept, times
