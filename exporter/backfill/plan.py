"""What remote write sends, and what it sent: `send/` inside the resume state.

A round is the jobs whose every window was read and that no earlier round holds, fixed when
it is planned: their series, merged as the file path merges them (each series once, from the
first job holding it, none an earlier round sent), cut into time slices of `SLICE` seconds,
one file per slice (`r<N>/s<start>.jsonl`, one line per piece: the job, the family, the labels
sorted by name and the piece's points in time order). A round is planned in `r<N>.tmp/` and
renamed whole, so a kill while planning leaves nothing half-planned.

Slices are sent oldest first, so each series' samples reach the store in time order and the
oldest, the ones a store's window may refuse, go first, right after that window was measured.
A batch holds pieces of one slice only: a refusal of its oldest samples cannot take newer
ones with it. The round's `ledger` has a line per decision, written after the store answered:
the oldest time sent for a slice (its cutoff), then one per batch (sent, refused) and for the
samples the cutoff kept back. A resumed run skips every batch the ledger holds and rebuilds
the others exactly: pieces, slices and cutoff are on disk. Only a kill -9 during a request can
send that one batch twice.

What did not go (older than the cutoff, refused) is kept per job in `rest/<target>/<job>/`, the
same files as the reading state, so the file path's writer makes the promtool file of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from exporter.backfill.state import JobState, read_journal
from exporter.backfill.writer import merged
from exporter.providers.kit.history import Series

SLICE: Final = 900
# Pieces buffered while planning before they are appended to their slice files.
SPILL_BYTES: Final = 8 * 1024 * 1024
LEDGER: Final = "ledger"
SENT: Final = "sent"
REFUSED: Final = "refused"
# Older than the store takes: never sent.
OLDER: Final = "older"
_ROUND: Final = re.compile(r"r\d+")


@dataclass(slots=True)
class Piece:
    job: str
    family: str
    # Sorted by name, `__name__` among them.
    labels: tuple[tuple[str, str], ...]
    points: list[tuple[float, float]]

    def series(self) -> Series:
        names = tuple(n for n, _ in self.labels if n != "__name__")
        values = tuple(v for n, v in self.labels if n != "__name__")
        return Series(self.family, names, values, list(self.points))


def job_key(job: JobState) -> str:
    """`t0/j3`: where the job's files are inside the state."""
    return f"{job.path.parent.name}/{job.path.name}"


def with_name(family: str, labels: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The series' labels as remote write sends them: `__name__` among them, sorted by name,
    and none with an empty value (which the stores treat as no label)."""
    return tuple(sorted([("__name__", family), *((n, v) for n, v in labels if v)]))


class _Spill:
    """Pieces by slice, appended to their files a few megabytes at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: dict[int, list[str]] = {}
        self.samples: dict[int, int] = {}
        self.size = 0

    def add(self, key: str, family: str, labels: tuple[tuple[str, str], ...], points: Any) -> None:
        by_slice: dict[int, list[tuple[float, float]]] = {}
        for point in points:
            by_slice.setdefault(int(point[0] // SLICE) * SLICE, []).append(point)
        for start, part in by_slice.items():
            line = json.dumps([key, family, labels, part]) + "\n"
            self.lines.setdefault(start, []).append(line)
            self.samples[start] = self.samples.get(start, 0) + len(part)
            self.size += len(line)
        if self.size >= SPILL_BYTES:
            self.flush()

    def flush(self) -> None:
        for start, lines in self.lines.items():
            with (self.path / f"s{start}.jsonl").open("a", encoding="utf-8") as out:
                out.writelines(lines)
        self.lines, self.size = {}, 0


class Round:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.number = int(path.name[1:])
        meta = json.loads((path / "round.json").read_text(encoding="utf-8"))
        self.jobs: list[str] = meta["jobs"]
        self.slices: dict[int, int] = {int(s): n for s, n in meta["slices"]}
        self.cutoffs: dict[int, float | None] = {}
        self.done: dict[tuple[int, int], dict[str, Any]] = {}
        self._recover()

    def _recover(self) -> None:
        for entry in read_journal(self.path / LEDGER):
            self._note(entry)

    def _note(self, entry: dict[str, Any]) -> None:
        if "cutoff" in entry:
            self.cutoffs[int(entry["slice"])] = entry["cutoff"]
        else:
            self.done[int(entry["slice"]), int(entry["batch"])] = entry

    def record(self, entry: dict[str, Any]) -> None:
        with (self.path / LEDGER).open("a", encoding="utf-8") as ledger:
            ledger.write(json.dumps(entry) + "\n")
        self._note(entry)

    def pieces(self, start: int) -> Iterator[Piece]:
        with (self.path / f"s{start}.jsonl").open(encoding="utf-8") as lines:
            for line in lines:
                job, family, labels, points = json.loads(line)
                pairs = tuple((name, value) for name, value in labels)
                yield Piece(job, family, pairs, [(at, v) for at, v in points])

    @property
    def entries(self) -> list[dict[str, Any]]:
        return list(self.done.values())


class SendState:
    """`send/` beside the reading state: its rounds and what did not go."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.path = state / "send"
        self.path.mkdir(exist_ok=True)
        for partial in self.path.glob("r*.tmp"):
            shutil.rmtree(partial)
        found = [p for p in self.path.iterdir() if _ROUND.fullmatch(p.name)]
        self.rounds = sorted((Round(p) for p in found), key=lambda r: r.number)

    def planned(self) -> set[str]:
        return {job for r in self.rounds for job in r.jobs}

    def plan(self, complete: Sequence[JobState]) -> Round | None:
        """A round of the `complete` jobs no round holds yet (None when there are none); a
        series an earlier round's job holds is not sent again."""
        held = self.planned()
        jobs = [j for j in complete if job_key(j) not in held]
        if not jobs:
            return None
        earlier = [JobState(self.state / key) for r in self.rounds for key in r.jobs]
        number = len(self.rounds)
        tmp = self.path / f"r{number}.tmp"
        tmp.mkdir()
        spill = _Spill(tmp)
        families = sorted({f for job in jobs for f in job.families()})
        for family in families:
            seen: set[str] = set()
            for job in earlier:
                for _ in merged(job, family, seen):
                    pass
            for job in jobs:
                for series in merged(job, family, seen):
                    spill.add(job_key(job), family, with_name(family, series.labels), series.points)
        spill.flush()
        meta = {"jobs": [job_key(j) for j in jobs], "slices": sorted(spill.samples.items())}
        (tmp / "round.json").write_text(json.dumps(meta), encoding="utf-8")
        final = self.path / f"r{number}"
        os.replace(tmp, final)
        planned = Round(final)
        self.rounds.append(planned)
        return planned

    def rest_job(self, key: str) -> JobState:
        return JobState(self.path / "rest" / key)

    def keep(self, pieces: Sequence[Piece], key: str) -> None:
        """Add `pieces` to what did not go, as task `key` of each of their jobs (once: a
        task the job holds already is not added again)."""
        by_job: dict[str, list[Series]] = {}
        for piece in pieces:
            by_job.setdefault(piece.job, []).append(piece.series())
        for job, series in by_job.items():
            rest = self.rest_job(job)
            if key not in rest.done:
                rest.commit(key, series)

    def rest(self) -> list[JobState]:
        """What did not go, job by job in the reading state's order."""
        root = self.path / "rest"
        if not root.exists():
            return []
        jobs = [JobState(p) for p in root.glob("t*/j*") if p.is_dir()]
        return sorted((j for j in jobs if j.done), key=lambda j: j.order)
