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
        """A changed target: its unchanged jobs as they were, the others taken again; its
        parts per family the previous ones with the replaced parts swapped in, when the same
        jobs are there in the same order and none of them gained or lost a part."""
        before = old.jobs if old is not None else {}
        jobs: dict[str, _Job] = {}
        swaps: list[tuple[RenderedPart, RenderedPart]] = []
        patch = old is not None
        for job_id, job in snapshot.jobs.items():
            kept = before.get(job_id)
            if kept is None or kept.job is not job:
                kept, swapped = self._job(snapshot.target, job, kept, walk, lines_of)
                patch = patch and swapped is not None
                swaps += swapped or ()
            jobs[job_id] = kept
        for job_id, gone in before.items():
            if job_id not in jobs:
                self._release(gone, walk)
        families = None
        if old is not None and patch and list(jobs) == list(before):
            families = _patched(old.families, swaps)
        return _Target(snapshot, jobs, families if families is not None else _families(jobs))

    def _job(
        self, target: str, job: JobData, old: _Job | None, walk: Walk, lines_of: LinesOf
    ) -> tuple[_Job, list[tuple[RenderedPart, RenderedPart]] | None]:
        """A changed job's parts: those whose samples are the very objects of `old`'s kept as
        they are (a read changes one part of a job's two dozen), the others taken; and the
        parts replaced (old, new), None if a part came or went."""
        take = self._parts.take
        before = old.parts if old is not None else {}
        # With the same part names, only the parts `merge` made anew are looked at.
        same = old is not None and job.parts.keys() == old.job.parts.keys()
        olds = old.job.parts if old is not None else {}
        names = [n for n, p in job.parts.items() if olds.get(n) is not p] if same else job.parts
        parts = dict(before) if same else {}
        swapped: list[tuple[RenderedPart, RenderedPart]] = []
        for name in names:
            samples, kept = job.parts[name].samples, before.get(name)
            if kept is not None and kept.samples is samples:
                parts[name] = kept
            elif samples:
                parts[name] = take(samples, (target, job.job_id, name), walk, lines_of)
                if kept is not None:
                    swapped.append((kept, parts[name]))
            else:
                parts.pop(name, None)
        for name in names if same else before:
            gone = before.get(name)
            if gone is not None and parts.get(name) is not gone:
                self._parts.release(gone, walk)
        families = _swap(old, parts, swapped) if old is not None else None
        if families is not None:
            return _Job(job, parts, families), swapped
        # In the job's order of parts (`parts` may hold the previous order).
        families = {}
        for rendered in [parts[n] for n in job.parts if n in parts]:
            for family in rendered.info.families:
                families.setdefault(family, []).append(rendered)
        return _Job(job, parts, families), None

    def _release(self, job: _Job, walk: Walk) -> None:
        for part in job.parts.values():
            self._parts.release(part, walk)


def _swap(
    old: _Job, parts: dict[str, RenderedPart], swapped: list[tuple[RenderedPart, RenderedPart]]
) -> Families | None:
    """The job's parts per family as `old` had them but for the parts `swapped` (old, new),
    when no part came or went and each new one writes the families of the one it replaced,
    alone in each (`merge` may put a part read again last: where a family has two of a
    job's parts, their order is the job's); None otherwise (they are sorted again)."""
    if parts.keys() != old.parts.keys():
        return None
    families = dict(old.families)
    for was, now in swapped:
        if now.info.families is not was.info.families:
            return None
        for family in now.info.families:
            if families[family] != [was]:
                return None
            families[family] = [now]
    return families


def _families(jobs: dict[str, _Job]) -> Families:
    """The jobs' parts per family, in order."""
    families: Families = {}
    for entry in jobs.values():
        for name, parts in entry.families.items():
            found = families.get(name)
            if found is None:
                families[name] = list(parts)
            else:
                found += parts
    return families


def _patched(families: Families, swaps: list[tuple[RenderedPart, RenderedPart]]) -> Families | None:
    """`families` with each swap's (old, new) new part where its old one was, the lists
    changed copied; None if an old part is not found once in a family it writes."""
    patched = dict(families)
    places: dict[str, dict[int, int]] = {}
    for was, now in swaps:
        for family in now.info.families:
            where = places.get(family)
            if where is None:
                listed = patched[family] = list(patched.get(family, ()))
                where = places[family] = {id(p): k for k, p in enumerate(listed)}
                if len(where) != len(listed):
                    return None
            index = where.pop(id(was), None)
            if index is None:
                return None
            patched[family][index] = now
            where[id(now)] = index
    return patched
