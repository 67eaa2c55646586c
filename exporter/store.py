"""The store: the current snapshot of every target, swapped whole.

A poll never edits what a scrape may be reading: it builds a new `TargetSnapshot` and the
store replaces the target's entry and its version in one assignment, so a render sees every
target either before or after a poll, never a mix.

What it keeps has equal label tuples and label strings shared (`share_labels`): providers
build them per sample (AIHC's passes every value through `label()`, a new string each time),
so 100k series would otherwise hold ~30 MB of copies of a few thousand job and pod names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from math import copysign
from types import MappingProxyType

from exporter.model import Sample, TargetSnapshot


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


# Sample's own __new__ is a Python function; at 100k samples a poll, skipping it is worth it.
_new_sample = functools.partial(tuple.__new__, Sample)


def share_labels(
    snapshot: TargetSnapshot, previous: TargetSnapshot | None = None
) -> TargetSnapshot:
    """An equal snapshot in which equal label tuples, and the strings in them, are one object,
    and a part read again keeps what its previous read had.

    Jobs and parts that are the very objects of `previous` were shared when it was stored and
    are kept as they are: a checkpoint that read a quarter of the jobs shares a quarter. A part
    read again takes its previous read's label tuples where the sample in the same place has
    equal ones, and its previous read's samples tuple whole when every sample writes the same
    line: the renderer keeps that tuple's lines (`exporter.rendering` keys them on its
    identity), so a status, info or pod list that did not change is not rendered again, and
    the reply's copies die at once."""
    names: dict[tuple[str, ...], tuple[str, ...]] = {}
    values: dict[tuple[str, ...], tuple[str, ...]] = {}
    strings: dict[str, str] = {}
    jobs = {}
    before = previous.jobs if previous is not None else {}
    for job_id, job in snapshot.jobs.items():
        old = before.get(job_id)
        if old is job:
            jobs[job_id] = job
            continue
        old_parts = old.parts if old is not None else {}
        parts = {}
        for part_name, part in job.parts.items():
            old_part = old_parts.get(part_name)
            if old_part is part:
                parts[part_name] = part
                continue
            was = old_part.samples if old_part is not None else ()
            count = len(was)
            same = count == len(part.samples)
            samples: list[Sample] = []
            for index, sample in enumerate(part.samples):
                name, label_names, label_values, value = sample
                prior = was[index] if index < count else None
                if prior is not None and (prior[2] != label_values or prior[1] != label_names):
                    prior = None
                if same:
                    # Equal numbers write the same line, but 0.0 and -0.0 (equal) print
                    # apart; NaN is never equal.
                    if (
                        prior is not None
                        and prior[3] == value
                        and prior[0] == name
                        and (value or copysign(1.0, value) == copysign(1.0, prior[3]))
                    ):
                        continue
                    same = False
                    samples += was[:index]
                if prior is not None:
                    shared_names, shared_values = prior[1], prior[2]
                else:
                    shared_names = names.setdefault(label_names, label_names)
                    found = values.get(label_values)
                    if found is None:
                        found = tuple([strings.setdefault(v, v) for v in label_values])
                        values[found] = found
                    shared_values = found
                if shared_names is label_names and shared_values is label_values:
                    samples.append(sample)
                else:
                    samples.append(_new_sample((name, shared_names, shared_values, value)))
            parts[part_name] = replace(part, samples=was if same else tuple(samples))
        jobs[job_id] = replace(job, parts=MappingProxyType(parts))
    return replace(snapshot, jobs=MappingProxyType(jobs))
