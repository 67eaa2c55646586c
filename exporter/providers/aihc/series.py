"""What one job's DescribeJobMetrics replies add up to: the newest valid sample of each
(metric type, pod) series, and the window the next call asks for.

A point counts only when it is newer than any point seen of its series, so each call asks
only for the window since the newest point already seen, and a quiet window keeps the newest
value. A pod no longer among the job's pods (`pods`, set by each DescribeJob) and absent from
a reply takes its series along. Pod names are interned: each reply parses its own copy of
every name, and a job's 22 metric types would otherwise keep 22 copies of each in their keys
(and in their samples' labels).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from exporter.model import Sample
from exporter.providers.aihc import mapping
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import DescribeJobMetricsReply, MetricPoint
from exporter.providers.kit.numbers import timestamp


@dataclass(slots=True)
class Series:
    """One (job, metric type, pod) series: its newest valid sample and newest point seen."""

    newest_at: float | None = None
    value: float = 0.0
    seen_until: float = 0.0


@dataclass(slots=True)
class JobSeries:
    """One job's series, read with `usage_unit`; unusable values are counted by `drop`."""

    usage_unit: str
    drop: Callable[[str], None]
    # metric type -> pod -> series
    series: dict[str, dict[str, Series]] = field(default_factory=dict)
    # The job's pods as its last DescribeJob named them; None before one.
    pods: set[str] | None = None
    # pod -> its newest point of any metric type: kept as points come, not walked for
    # (22 types x 8 pods: 53 of the 134 us a read's mapping took).
    newest: dict[str, float] = field(default_factory=dict)

    def window_start(self, metric_type: str, end: int, step: int, first_steps: int) -> int:
        """Just after the oldest "newest point" of the job's pods; `first_steps` back at first."""
        earliest = end - first_steps * step
        series = self.series.get(metric_type)
        if not series:
            return earliest
        since = min(s.seen_until for s in series.values()) + 1
        return int(max(earliest, min(since, end - step)))

    def add_reply(
        self, metric_type: str, who: JobIdentity, reply: DescribeJobMetricsReply
    ) -> tuple[Sample, ...]:
        """Fold a reply in; the metric type's samples, one per pod with a valid point."""
        series = self.series.setdefault(metric_type, {})
        in_reply: set[str] = set()
        newest = self.newest
        for pod_series in reply.metrics:
            pod = sys.intern(pod_series.pod_name)
            in_reply.add(pod)
            current = series.setdefault(pod, Series())
            self._absorb(metric_type, current, pod_series.metrics)
            if current.newest_at is not None and current.newest_at > newest.get(pod, 0.0):
                newest[pod] = current.newest_at
        if self.pods is not None:
            gone = [p for p in series if p not in self.pods and p not in in_reply]
            for pod in gone:
                del series[pod]
            if gone:
                self.newest = self.walk_newest()
        values = {
            pod: (s.newest_at, s.value) for pod, s in series.items() if s.newest_at is not None
        }
        return mapping.resource_samples(metric_type, who, values)

    def _absorb(self, metric_type: str, series: Series, points: Iterable[MetricPoint]) -> None:
        """Fold a pod's points into its series: only points newer than any seen count."""
        seen_until = series.seen_until
        for point in points:
            at = timestamp(point.time, self.drop)
            if at is None:
                continue
            if at <= seen_until:
                continue
            series.seen_until = max(series.seen_until, at)
            value = mapping.resource_number(metric_type, point.value, self.usage_unit, self.drop)
            if value is None:
                continue
            if series.newest_at is None or at >= series.newest_at:
                series.newest_at = at
                series.value = value

    def walk_newest(self) -> dict[str, float]:
        """Each pod's newest point of any metric type, found by walking every series."""
        newest: dict[str, float] = {}
        for by_pod in self.series.values():
            for pod, series in by_pod.items():
                if series.newest_at is not None:
                    newest[pod] = max(series.newest_at, newest.get(pod, series.newest_at))
        return newest
