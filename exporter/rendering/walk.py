"""The walk of a store view: each family's parts in view order (targets, jobs, parts).

A walk costs what changed: `merge` keeps a job that nothing changed as the very `JobData`
object, and the store a target that no poll changed as the very snapshot, so the walker keeps,
per target and per job, the parts it found there and their order per family. Only a changed
target's jobs are looked at, and only a changed job's parts are taken from the cache
(`parts.PartCache`): walking a whole pool part by part would cost each render more than the
change itself (figures in bench/README.md, issue 38).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from exporter.model import JobData, TargetSnapshot
from exporter.rendering.parts import LinesOf, PartCache, RenderedPart, Walk
from exporter.store import StoreView

Families = dict[str, list[RenderedPart]]


@dataclass(frozen=True, slots=True)
class _Job:
    job: JobData
    # Its parts with samples, by name.
    parts: dict[str, RenderedPart]
    # The job's parts per family, in order.
    families: Families


@dataclass(frozen=True, slots=True)
class _Target:
    snapshot: TargetSnapshot
    jobs: dict[str, _Job]
    families: Families


class Walker:
    """Walks store views, keeping what it found per target and per job for the next walk."""

    def __init__(self, parts: PartCache, families: Mapping[str, object]) -> None:
        self._parts = parts
        self._families = families
        self._targets: dict[tuple[str, str], _Target] = {}

    def walk(self, view: StoreView, lines_of: LinesOf) -> Walk:
        """The view's parts, rendering those not seen before; the cache forgets the others."""
        walk = Walk({name: ([], []) for name in self._families})
        for key in [k for k in self._targets if k not in view.snapshots]:
            for job in self._targets.pop(key).jobs.values():
                self._release(job, walk)
        for key, snapshot in view.snapshots.items():
            target = self._targets.get(key)
            if target is None or target.snapshot is not snapshot:
                target = self._targets[key] = self._target(snapshot, target, walk, lines_of)
            for name, parts in target.families.items():
                ordered, providers = walk.order[name]
                ordered += parts
                providers += [snapshot.provider] * len(parts)
        self._parts.settle(walk)
        return walk

    def _target(
        self, snapshot: TargetSnapshot, old: _Target | None, walk: Walk, lines_of: LinesOf
    ) -> _Target:
        """A changed target: its unchanged jobs as they were, the others taken again."""
        before = old.jobs if old is not None else {}
        jobs: dict[str, _Job] = {}
        for job_id, job in snapshot.jobs.items():
            kept = before.get(job_id)
            if kept is None or kept.job is not job:
                kept = self._job(snapshot.target, job, kept, walk, lines_of)
            jobs[job_id] = kept
        for job_id, gone in before.items():
            if job_id not in jobs:
                self._release(gone, walk)
        families: Families = {}
        for entry in jobs.values():
            for name, parts in entry.families.items():
                found = families.get(name)
                if found is None:
                    families[name] = list(parts)
                else:
                    found += parts
        return _Target(snapshot, jobs, families)

    def _job(
        self, target: str, job: JobData, old: _Job | None, walk: Walk, lines_of: LinesOf
    ) -> _Job:
        """A changed job's parts: those whose samples are the very objects of `old`'s kept as
        they are (a read changes one part of a job's two dozen), the others taken."""
        take = self._parts.take
        before = old.parts if old is not None else {}
        parts: dict[str, RenderedPart] = {}
        swapped: list[tuple[RenderedPart, RenderedPart]] = []
        for name, part in job.parts.items():
            kept = before.get(name)
            if kept is not None and kept.samples is part.samples:
                parts[name] = kept
            elif part.samples:
                parts[name] = take(part.samples, (target, job.job_id, name), walk, lines_of)
                if kept is not None:
                    swapped.append((kept, parts[name]))
        for name, gone in before.items():
            if parts.get(name) is not gone:
                self._parts.release(gone, walk)
        families = _swap(old, parts, swapped) if old is not None else None
        if families is None:
            families = {}
            for rendered in parts.values():
                for family in rendered.info.families:
                    families.setdefault(family, []).append(rendered)
        return _Job(job, parts, families)

    def _release(self, job: _Job, walk: Walk) -> None:
        for part in job.parts.values():
            self._parts.release(part, walk)


def _swap(
    old: _Job, parts: dict[str, RenderedPart], swapped: list[tuple[RenderedPart, RenderedPart]]
) -> Families | None:
    """The job's parts per family as `old` had them but for the parts `swapped` (old, new),
    when no part came or went and each new one writes the families of the one it replaced;
    None otherwise (they are sorted again)."""
    if list(parts) != list(old.parts):
        return None
    families = dict(old.families)
    for was, now in swapped:
        if now.info.families is not was.info.families:
            return None
        for family in now.info.families:
            listed = families[family] = list(families[family])
            listed[listed.index(was)] = now
    return families
