"""What one job's DescribeJobMetrics replies add up to: the newest valid sample of each
(metric type, pod) series, and the window the next call asks for.

A point counts only when it is newer than any point seen of its series, so each call asks
only for the window since the newest point already seen, and a quiet window keeps the newest
value. A pod no longer among the job's pods (`pods`, set by each DescribeJob) and absent from
a reply takes its series along. Pod names are interned: each reply parses its own copy of
every name, and a job's 22 metric types would otherwise keep 22 copies of each in their keys
(and in their samples' labels). A series is three doubles in its metric type's array, at
its pod's slot, one dict of slots for the job.

Samples are made as the store keeps them (`exporter.model.Samples`): a metric type's array of
values beside a shape kept from its last reply while its pods are the same, and one tuple of
label rows for all the job's types with the same pods. A reply builds no `Sample` and no label,
and the store and the renderer find the part's series where they were (its shape).
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from exporter.model import Sample, Samples, Shape
from exporter.providers.aihc import mapping
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import DescribeJobMetricsReply, MetricPoint, RawNumber
from exporter.providers.kit.numbers import timestamp

# A series' three numbers, at its offset (3 x its pod's slot) in its metric type's array.
_SEEN, _AT, _VALUE = 0, 1, 2
_NONE = math.nan  # no valid sample yet (`newest_at`); with `_SEEN`, no series of this type
_ABSENT = array("d", (_NONE, _NONE, 0.0))
# Integers below this convert to a float exactly, and never overflow one.
_EXACT = 2**53


def _present(numbers: array[float], at: int) -> bool:
    return at < len(numbers) and numbers[at + _SEEN] == numbers[at + _SEEN]


@dataclass(slots=True)
class _Shapes:
    """The shapes of one job's samples: whom their label rows name; pods (in name order) ->
    their label rows, one tuple for all the job's kinds with those pods; and per kind (a
    metric type, or LAST_SAMPLE) the shape of its last samples, which the store's share."""

    who: JobIdentity | None = None
    rows: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = field(default_factory=dict)
    shapes: dict[str, Shape] = field(default_factory=dict)

    def samples(
        self, kind: str, who: JobIdentity, pods: tuple[str, ...], values: list[float]
    ) -> Sequence[Sample]:
        """`values` of `pods` (in that order) as samples of `kind`, on the shape of its last
        samples when their pods were the same."""
        if not pods:
            return ()
        if who is not self.who:
            self.who, self.rows, self.shapes = who, {}, {}
        rows = self.rows.get(pods)
        if rows is None:
            if len(self.rows) > len(self.shapes):
                # More pod sets than kinds: some no kind has any more (pods came and went).
                self.rows = {}
            rows = self.rows[pods] = tuple(mapping.pod_values(who, p) for p in pods)
        shape = self.shapes.get(kind)
        if shape is None or shape.label_values is not rows:
            shape = self.shapes[kind] = mapping.pod_shape(kind, rows)
        return Samples(shape, array("d", values))


@dataclass(slots=True)
class JobSeries:
    """One job's series, read with `usage_unit`; unusable values are counted by `drop`.

    One dict of pod slots for all of the job's metric types, and per type one array of three
    doubles a slot (the newest point seen, the newest valid sample's time and value; a NaN
    point seen: no series of that type for the pod): not a dict per type."""

    usage_unit: str
    drop: Callable[[str], None]
    # pod -> its slot, 0..len-1: every pod with a series of some metric type
    slots: dict[str, int] = field(default_factory=dict)
    # metric type -> three doubles a slot (slots past its end: no series of this type)
    series: dict[str, array[float]] = field(default_factory=dict)
    # The job's pods as its last DescribeJob named them; None before one.
    pods: set[str] | None = None
    # pod -> its newest point of any metric type: kept as points come, not walked for
    # (22 types x 8 pods: 53 of the 134 us a read's mapping took).
    newest: dict[str, float] = field(default_factory=dict)
    # The last `last_samples()`: for whom, of which times, and the samples.
    _last: tuple[JobIdentity, dict[str, float], Sequence[Sample]] | None = field(
        default=None, repr=False
    )
    _shapes: _Shapes = field(default_factory=_Shapes, repr=False)

    def window_start(self, metric_type: str, end: int, step: int, first_steps: int) -> int:
        """Just after the oldest "newest point" of the job's pods; `first_steps` back at first."""
        earliest = end - first_steps * step
        n = self.series.get(metric_type)
        if n is None:
            return earliest
        size = len(n)
        # `_present()` inlined: a call a pod cost more than the rest of this.
        seen = [
            n[at] for at in map((3).__mul__, self.slots.values()) if at < size and n[at] == n[at]
        ]
        if not seen:
            return earliest
        return int(max(earliest, min(min(seen) + 1, end - step)))

    def add_reply(
        self, metric_type: str, who: JobIdentity, reply: DescribeJobMetricsReply
    ) -> Sequence[Sample]:
        """Fold a reply in; the metric type's samples, one per pod with a valid point."""
        n = self.series.setdefault(metric_type, array("d"))
        size = len(n)
        in_reply: set[str] = set()
        newest = self.newest
        read = mapping.resource_reader(metric_type, self.usage_unit, self.drop)
        for pod_series in reply.metrics:
            pod = sys.intern(pod_series.pod_name)
            in_reply.add(pod)
            at = self._absorb(read, n, self._offset(n, pod), pod_series.metrics)
            if at == at and at > newest.get(pod, 0.0):
                newest[pod] = at
        if len(n) != size:
            # Grown a series at a time, an array keeps ~a third more room than it holds.
            n = self.series[metric_type] = array("d", n)
        # Every pod with a slot has a reply's series: none can be gone (the usual reply).
        if self.pods is not None and len(in_reply) < len(self.slots):
            self._drop_gone(n, self.pods, in_reply)
        return self._samples(metric_type, who)

    def last_samples(self, who: JobIdentity) -> Sequence[Sample]:
        """Each pod's newest point of any type, as samples: the same object while no reply
        brought a newer one (most of a job's replies in a round bring none)."""
        last = self._last
        newest = self.newest
        if last is not None and last[0] is who and last[1] == newest:
            return last[2]
        pods = tuple(sorted(newest))
        samples = self._shapes.samples(mapping.LAST_SAMPLE, who, pods, [newest[p] for p in pods])
        self._last = (who, dict(newest), samples)
        return samples

    def _samples(self, metric_type: str, who: JobIdentity) -> Sequence[Sample]:
        """One sample per pod with a valid point of `metric_type`, by pod name: its newest."""
        n = self.series.get(metric_type, _ABSENT)
        size = len(n)
        valid = [
            (p, 3 * s)
            for p, s in sorted(self.slots.items())
            if 3 * s < size and n[3 * s + _AT] == n[3 * s + _AT]
        ]
        values = [n[at + _VALUE] for _, at in valid]
        return self._shapes.samples(metric_type, who, tuple(p for p, _ in valid), values)

    def _offset(self, n: array[float], pod: str) -> int:
        """`pod`'s offset in `n`, its series made (no point seen yet) if it had none."""
        slot = self.slots.get(pod)
        if slot is None:
            slot = self.slots[pod] = len(self.slots)
        at = 3 * slot
        while len(n) <= at:
            n.extend(_ABSENT)
        if n[at + _SEEN] != n[at + _SEEN]:
            n[at + _SEEN] = 0.0
        return at

    def _drop_gone(self, n: array[float], pods: set[str], in_reply: set[str]) -> None:
        """Drop the type's series of pods neither in `pods` nor in its reply; a pod with no
        series left of any type gives its slot up."""
        gone = [
            s
            for p, s in self.slots.items()
            if _present(n, 3 * s) and p not in pods and p not in in_reply
        ]
        if not gone:
            return
        for s in gone:
            n[3 * s : 3 * s + 3] = _ABSENT
        live = [
            p
            for p, s in self.slots.items()
            if any(_present(a, 3 * s) for a in self.series.values())
        ]
        if len(live) < len(self.slots):
            self._repack(live)
        self.newest = self.walk_newest()

    def _repack(self, live: list[str]) -> None:
        """Only `live` pods' slots, numbered anew, in every type's array."""
        old = self.slots
        self.slots = {p: k for k, p in enumerate(live)}
        for metric_type, n in self.series.items():
            packed = array("d")
            for pod in live:
                at = 3 * old[pod]
                packed.extend(n[at : at + 3] if at < len(n) else _ABSENT)
            self.series[metric_type] = packed

    def _newest_of(self, metric_type: str) -> dict[str, tuple[float, float]]:
        """pod -> (time, value) of its newest valid sample of `metric_type`, for pods with one."""
        n = self.series.get(metric_type, _ABSENT)
        found = {}
        for pod, slot in self.slots.items():
            at = 3 * slot
            if at < len(n) and n[at + _AT] == n[at + _AT]:
                found[pod] = (n[at + _AT], n[at + _VALUE])
        return found

    def _absorb(
        self,
        read: Callable[[RawNumber], float | None],
        n: array[float],
        at: int,
        points: Iterable[MetricPoint],
    ) -> float:
        """Fold a pod's points into its series at `at` in `n` (only points newer than any seen
        count), each value `read` (`mapping.resource_reader`); the time of its newest valid
        sample, NaN if none."""
        drop = self.drop
        seen_until = seen = n[at + _SEEN]
        newest_at, newest = n[at + _AT], n[at + _VALUE]
        for raw_time, raw_value in points:
            # An integer time (what the service sends) as `timestamp()` would read it.
            if type(raw_time) is int and 0 < raw_time < _EXACT:
                when: float | None = float(raw_time)
            else:
                when = timestamp(raw_time, drop)
            if when is None or when <= seen_until:
                continue
            seen = max(seen, when)
            value = read(raw_value)
            if value is not None and (newest_at != newest_at or when >= newest_at):
                newest_at, newest = when, value
        n[at + _SEEN], n[at + _AT], n[at + _VALUE] = seen, newest_at, newest
        return newest_at

    def walk_newest(self) -> dict[str, float]:
        """Each pod's newest point of any metric type, found by walking every series."""
        newest: dict[str, float] = {}
        for metric_type in self.series:
            for pod, (at, _) in self._newest_of(metric_type).items():
                newest[pod] = max(at, newest.get(pod, at))
        return newest
