"""From AIHC reply models to samples of the metric contract (`exporter.metrics`).

Pure functions: no I/O, no state. Every upstream number is parsed here, one at a time; one that
is not a finite number is reported through `drop(reason)` and left out, and the rest of the
reply is kept.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

from exporter.metrics import AIHC_METRIC_BY_TYPE, AIHC_USAGE_TYPES
from exporter.model import JOB_LABELS, POD_LABELS, Sample
from exporter.providers.aihc.models import Event, Job, Pod, RawNumber

PROVIDER = "aihc"
# Long enough for any real name, short enough that a runaway value cannot bloat every scrape.
MAX_LABEL_LENGTH = 1024

Drop = Callable[[str], None]

UNPARSABLE = "unparsable"
NOT_FINITE = "not_finite"

# Go's time.String(): `2024-07-15 16:52:50 +0000 UTC`, maybe with fractional seconds.
_GO_TIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?\s*([+-]\d{2}):?(\d{2})?"
    r"(?:\s+\S+)?(?:\s+m=[+-][\d.]+)?"
)


def label(value: str) -> str:
    """An upstream string made safe as a label value (valid UTF-8, bounded length)."""
    text = value if len(value) <= MAX_LABEL_LENGTH else value[:MAX_LABEL_LENGTH]
    return text.encode("utf-8", "replace").decode("utf-8")


def parse_number(raw: RawNumber) -> tuple[float | None, str | None]:
    """(value, None) for a finite number; (None, reason) for anything else."""
    if isinstance(raw, bool) or raw is None:
        return None, UNPARSABLE
    if isinstance(raw, str):
        text = raw.strip()
        try:
            value = float(text)
        except ValueError:
            return None, UNPARSABLE
        # float() also takes `1_000`; a decimal from upstream never has an underscore.
        if "_" in text:
            return None, UNPARSABLE
    else:
        try:
            value = float(raw)
        except OverflowError:
            # A JSON integer too large for a float.
            return None, NOT_FINITE
    if not math.isfinite(value):
        return None, NOT_FINITE
    return value, None


def number(raw: RawNumber, drop: Drop) -> float | None:
    value, reason = parse_number(raw)
    if reason is not None:
        drop(reason)
    return value


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
        drop(UNPARSABLE)
    return value


@dataclass(frozen=True, slots=True)
class JobIdentity:
    resource_pool: str
    queue: str
    job_id: str
    # The job labels' values, made once: every sample of the job starts with them.
    values: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        labels = (PROVIDER, label(self.resource_pool), label(self.queue), label(self.job_id))
        object.__setattr__(self, "values", labels)


def _job_sample(name: str, who: JobIdentity, value: float, **extra: str) -> Sample:
    return Sample(
        name,
        (*JOB_LABELS, *extra),
        (*who.values, *(label(v) for v in extra.values())),
        value,
    )


def _pod_sample(name: str, who: JobIdentity, pod: str, value: float, **extra: str) -> Sample:
    return Sample(
        name,
        (*POD_LABELS, *extra),
        (*who.values, label(pod), *(label(v) for v in extra.values())),
        value,
    )


def job_samples(
    job: Job, who: JobIdentity, statuses: Sequence[str], drop: Drop
) -> tuple[Sample, ...]:
    """Info, status state set, created/finished timestamps and replicas of one listed job."""
    samples = [
        _job_sample(
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
    samples += [
        _job_sample("training_job_status", who, 1.0 if s == job.status else 0.0, status=s)
        for s in statuses
    ]
    created = _timestamp(job.created_at, drop)
    if created is not None:
        samples.append(_job_sample("training_job_created_timestamp_seconds", who, created))
    finished = _timestamp(job.finished_at, drop)
    if finished is not None:
        samples.append(_job_sample("training_job_finished_timestamp_seconds", who, finished))
    if job.job_spec.replicas is not None:
        replicas = number(job.job_spec.replicas, drop)
        if replicas is not None:
            samples.append(_job_sample("training_job_replicas", who, replicas))
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
        current = pod_phase(pod)
        samples += [
            _pod_sample("training_pod_phase", who, pod.name, 1.0 if p == current else 0.0, phase=p)
            for p in phases
        ]
        if pod.restart_count is not None:
            restarts = number(pod.restart_count, drop)
            if restarts is not None:
                samples.append(_pod_sample("training_pod_restarts", who, pod.name, restarts))
    return tuple(samples)


def resource_value(metric_type: str, value: float, usage_unit: str) -> float:
    """Upstream's value in the exported unit: usage percentages become ratios."""
    if metric_type in AIHC_USAGE_TYPES and usage_unit == "percent":
        # Through the decimal text, so "82.772012" becomes 0.82772012, not 0.8277201200000001.
        return float(Decimal(repr(value)) / 100)
    return value


def resource_samples(
    metric_type: str, who: JobIdentity, newest: Mapping[str, tuple[float, float]]
) -> tuple[Sample, ...]:
    """One sample per pod: the newest value seen for `metric_type` (already converted)."""
    name = AIHC_METRIC_BY_TYPE[metric_type]
    return tuple(_pod_sample(name, who, pod, value) for pod, (_, value) in sorted(newest.items()))


def last_sample_samples(who: JobIdentity, newest: Mapping[str, float]) -> tuple[Sample, ...]:
    return tuple(
        _pod_sample("training_pod_last_sample_timestamp_seconds", who, pod, at)
        for pod, at in sorted(newest.items())
    )


def event_samples(events: Iterable[Event], who: JobIdentity, drop: Drop) -> tuple[Sample, ...]:
    """Event counts summed, and the newest lastTimestamp, per (type, reason)."""
    counts: dict[tuple[str, str], float] = {}
    newest: dict[tuple[str, str], float] = {}
    for event in events:
        key = (event.type, event.reason)
        if event.count is None:
            # An event object exists, so it happened at least once.
            count: float | None = 1.0
        else:
            count = number(event.count, drop)
            if count is not None and count < 0:
                drop(UNPARSABLE)
                count = None
        counts[key] = counts.get(key, 0.0) + (count or 0.0)
        text = event.last_timestamp or event.first_timestamp
        at = parse_event_time(text) if text else None
        if text and at is None:
            drop(UNPARSABLE)
        if at is not None:
            newest[key] = max(at, newest.get(key, at))
    samples = []
    for (event_type, reason), total in sorted(counts.items()):
        samples.append(
            _job_sample(
                "training_job_events_total", who, total, event_type=event_type, reason=reason
            )
        )
        at = newest.get((event_type, reason))
        if at is not None:
            samples.append(
                _job_sample(
                    "training_job_last_event_timestamp_seconds",
                    who,
                    at,
                    event_type=event_type,
                    reason=reason,
                )
            )
    return tuple(samples)
