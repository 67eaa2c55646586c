"""What one job's DescribeJobMetrics replies add up to: the newest valid sample of each
(metric type, pod) series, and the window the next call asks for.

A point counts only when it is newer than any point seen of its series, so each call asks
only for the window since the newest point already seen, and a quiet window keeps the newest
value. A pod no longer among the job's pods (`pods`, set by each DescribeJob) and absent from
a reply takes its series along. Pod names are interned: each reply parses its own copy of
every name, and a job's 22 metric types would otherwise keep 22 copies of each in their keys
(and in their samples' labels). A series is three doubles in its metric type's array.
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from exporter.model import Sample
from exporter.providers.aihc import mapping
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import DescribeJobMetricsReply, MetricPoint
from exporter.providers.kit.numbers import timestamp

# A series' three numbers, at its slot in its metric type's array.
_SEEN, _AT, _VALUE = 0, 1, 2
_NONE = math.nan  # no valid sample yet (`newest_at`)


@dataclass(slots=True)
class TypeSeries:
    """One metric type's series of a job, three doubles a pod in one array: the newest point
    seen, the newest valid sample's time (NaN: none yet) and value. One array and a dict of
    slots per type, not an object and two floats per series."""

    slots: dict[str, int] = field(default_factory=dict)
    numbers: array[float] = field(default_factory=lambda: array("d"))

    def slot(self, pod: str) -> int:
        at = self.slots.get(pod)
        if at is None:
            at = self.slots[pod] = len(self.numbers)
            self.numbers.extend((0.0, _NONE, 0.0))
        return at

    def seen_until(self, pod: str) -> float:
        return self.numbers[self.slots[pod] + _SEEN]

    def newest(self) -> dict[str, tuple[float, float]]:
        """pod -> (time, value) of its newest valid sample, for pods that have one."""
        n = self.numbers
        return {
            p: (n[i + _AT], n[i + _VALUE])
            for p, i in self.slots.items()
            if n[i + _AT] == n[i + _AT]
        }

    def keep(self, pods: Iterable[str]) -> TypeSeries:
        """Only `pods`' series, packed anew."""
        kept = TypeSeries()
        for pod in pods:
            at = self.slots[pod]
            kept.slots[pod] = len(kept.numbers)
            kept.numbers.extend(self.numbers[at : at + 3])
        return kept


@dataclass(slots=True)
class JobSeries:
    """One job's series, read with `usage_unit`; unusable values are counted by `drop`."""

    usage_unit: str
    drop: Callable[[str], None]
    # metric type -> its pods' series
    series: dict[str, TypeSeries] = field(default_factory=dict)
    # The job's pods as its last DescribeJob named them; None before one.
    pods: set[str] | None = None
    # pod -> its newest point of any metric type: kept as points come, not walked for
    # (22 types x 8 pods: 53 of the 134 us a read's mapping took).
    newest: dict[str, float] = field(default_factory=dict)

    def window_start(self, metric_type: str, end: int, step: int, first_steps: int) -> int:
        """Just after the oldest "newest point" of the job's pods; `first_steps` back at first."""
        earliest = end - first_steps * step
        series = self.series.get(metric_type)
        if not series or not series.slots:
            return earliest
        since = min(series.seen_until(p) for p in series.slots) + 1
        return int(max(earliest, min(since, end - step)))

    def add_reply(
        self, metric_type: str, who: JobIdentity, reply: DescribeJobMetricsReply
    ) -> tuple[Sample, ...]:
        """Fold a reply in; the metric type's samples, one per pod with a valid point."""
        series = self.series.setdefault(metric_type, TypeSeries())
        in_reply: set[str] = set()
        newest = self.newest
        for pod_series in reply.metrics:
            pod = sys.intern(pod_series.pod_name)
            in_reply.add(pod)
            at = self._absorb(metric_type, series, series.slot(pod), pod_series.metrics)
            if at == at and at > newest.get(pod, 0.0):
                newest[pod] = at
        if self.pods is not None:
            pods = self.pods
            if any(p not in pods and p not in in_reply for p in series.slots):
                kept = [p for p in series.slots if p in pods or p in in_reply]
                series = self.series[metric_type] = series.keep(kept)
                self.newest = self.walk_newest()
        return mapping.resource_samples(metric_type, who, series.newest())

    def _absorb(
        self, metric_type: str, series: TypeSeries, at: int, points: Iterable[MetricPoint]
    ) -> float:
        """Fold a pod's points into its series (only points newer than any seen count); the
        time of its newest valid sample, NaN if none."""
        n = series.numbers
        seen_until = n[at + _SEEN]
        for point in points:
            when = timestamp(point.time, self.drop)
            if when is None or when <= seen_until:
                continue
            n[at + _SEEN] = max(n[at + _SEEN], when)
            value = mapping.resource_number(metric_type, point.value, self.usage_unit, self.drop)
            if value is None:
                continue
            newest_at = n[at + _AT]
            if newest_at != newest_at or when >= newest_at:
                n[at + _AT], n[at + _VALUE] = when, value
        return n[at + _AT]

    def walk_newest(self) -> dict[str, float]:
        """Each pod's newest point of any metric type, found by walking every series."""
        newest: dict[str, float] = {}
        for by_type in self.series.values():
            for pod, (at, _) in by_type.newest().items():
                newest[pod] = max(at, newest.get(pod, at))
        return newest
