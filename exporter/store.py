"""The store: the current snapshot of every target, swapped whole.

A poll never edits what a scrape may be reading: it builds a new `TargetSnapshot` and the
store replaces the target's entry and its version in one assignment, so a render sees every
target either before or after a poll, never a mix.

What it keeps is packed (`share_labels`): each part's samples as one shape and an array of
values (`exporter.model.Samples`), with equal label tuples and label strings shared. Providers
mostly build a `Sample` per series (each label value passed through `label()`, a new string
each time): kept as they came, 100k series held ~40 MB of samples, floats and copies of a few
thousand job and pod names, and each read left the heap more fragmented. A provider may hand
a part packed already (AIHC's metric types, on a shape it keeps per type): it is kept as it
came, or as the part's previous samples when it writes the same lines.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from exporter.model import JobData, Part, Sample, Samples, Shape, TargetSnapshot


@dataclass(frozen=True, slots=True)
class StoreView:
    version: int
    snapshots: Mapping[tuple[str, str], TargetSnapshot]

    def series_by_provider(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (provider, _), snap in self.snapshots.items():
            counts[provider] = counts.get(provider, 0) + snap.series
        return counts


class SnapshotStore:
    def __init__(self) -> None:
        self._view = StoreView(0, MappingProxyType({}))
        self._listeners: list[Callable[[StoreView], None]] = []

    def view(self) -> StoreView:
        return self._view

    def get(self, provider: str, target: str) -> TargetSnapshot:
        return self._view.snapshots.get((provider, target)) or TargetSnapshot.empty(
            provider, target
        )

    def remove(self, provider: str, target: str) -> None:
        """A target a reload removed: its series go from the next scrape."""
        snapshots = {k: v for k, v in self._view.snapshots.items() if k != (provider, target)}
        self._view = StoreView(self._view.version + 1, MappingProxyType(snapshots))
        for listener in self._listeners:
            listener(self._view)

    def swap(self, snapshot: TargetSnapshot, *, shared: bool = False) -> None:
        """Make `snapshot` its target's; `shared`: `share_labels` was done (off the loop)."""
        if not shared:
            snapshot = share_labels(snapshot, self.get(snapshot.provider, snapshot.target))
        snapshots = dict(self._view.snapshots)
        snapshots[(snapshot.provider, snapshot.target)] = snapshot
        # In (provider, target) order, not first-poll order: where two targets export the
        # same series, the one the exposition keeps is the same on every run.
        ordered = dict(sorted(snapshots.items()))
        self._view = StoreView(self._view.version + 1, MappingProxyType(ordered))
        for listener in self._listeners:
            listener(self._view)

    def on_swap(self, listener: Callable[[StoreView], None]) -> None:
        self._listeners.append(listener)


def share_labels(
    snapshot: TargetSnapshot, previous: TargetSnapshot | None = None
) -> TargetSnapshot:
    """An equal snapshot whose parts read since `previous` are packed (`Samples`), with equal
    label tuples, and the strings in them, one object.

    Jobs and parts that are the very objects of `previous` were packed when it was stored and
    are kept as they are: a checkpoint that read a quarter of the jobs packs a quarter. A part
    read again keeps its previous read's shape when every sample has the same name and labels
    in the same place (else its previous label tuples where they are equal), and its previous
    `Samples` whole when the values are the same too: the renderer keys its lines on those
    objects (`exporter.rendering`), so a part whose values alone changed writes its lines from
    the previous ones, and one that did not change is not rendered again. A part that came
    packed is kept as it is, or as its previous `Samples` when it has that very shape and the
    same values."""
    packer = _Packer()
    before = previous.jobs if previous is not None else {}
    jobs = {}
    for job_id, job in snapshot.jobs.items():
        old = before.get(job_id)
        jobs[job_id] = job if old is job else packer.job(job, old)
    s = snapshot
    return TargetSnapshot(s.provider, s.target, MappingProxyType(jobs), s.taken_at, s.series)


class _Packer:
    """Packs the parts of one snapshot, sharing equal label tuples and strings between them."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._values: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._strings: dict[str, str] = {}

    def job(self, job: JobData, old: JobData | None) -> JobData:
        old_parts = old.parts if old is not None else {}
        parts = {}
        for name, part in job.parts.items():
            was = old_parts.get(name)
            if was is part:
                parts[name] = part
                continue
            prior = was.samples if was is not None else None
            kept = prior if isinstance(prior, Samples) else None
            if isinstance(part.samples, Samples):
                packed = _same(part.samples, kept)
                parts[name] = part if packed is part.samples else self._part(part, packed)
            else:
                parts[name] = self._part(part, self.pack(part.samples, kept))
        return JobData(job.job_id, MappingProxyType(parts))

    @staticmethod
    def _part(part: Part, samples: Samples) -> Part:
        return Part(samples, part.fetched_at, part.tier, part.failed)

    def pack(self, samples: Sequence[Sample], was: Samples | None) -> Samples:
        """`samples` packed: `was` itself if they write the same lines."""
        values = array("d", [s[3] for s in samples])
        shape = self._shape(samples, was.shape if was is not None else None)
        return _same(Samples(shape, values), was)

    def _shape(self, samples: Sequence[Sample], was: Shape | None) -> Shape:
        shape = Shape.of([s[0] for s in samples], [s[1] for s in samples], [s[2] for s in samples])
        if was is not None and len(was) == len(shape) and shape.same(was):
            return was
        before = was if was is not None else Shape((), (), ())
        count = len(before)
        label_names, label_values = [], []
        for index, (_, names, values, _) in enumerate(samples):
            same = index < count and before.label_values[index] == values
            if same and before.names_at(index) == names:
                label_names.append(before.names_at(index))
                label_values.append(before.label_values[index])
                continue
            label_names.append(self._names.setdefault(names, names))
            label_values.append(self._tuple(values))
        return Shape.of(shape.names, label_names, label_values)

    def _tuple(self, values: tuple[str, ...]) -> tuple[str, ...]:
        found = self._values.get(values)
        if found is None:
            strings = self._strings
            found = self._values[values] = tuple([strings.setdefault(v, v) for v in values])
        return found


def _same(samples: Samples, was: Samples | None) -> Samples:
    """`was` when `samples` write the same lines as it (its very shape, the same values),
    else `samples`: the renderer keeps the lines of a part whose samples are the same object."""
    # Equal bits write the same line; equal numbers need not (0.0 and -0.0).
    if (
        was is not None
        and samples.shape is was.shape
        and samples.values.tobytes() == was.values.tobytes()
    ):
        return was
    return samples
