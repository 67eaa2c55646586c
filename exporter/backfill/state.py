"""The resume state: a directory beside the output (`history.om.state/`).

- `run.json`: the parameters the run was started with, the window it resolved them to (so a
  resumed `--since 7d` reads the same windows, not a week back from the restart) and each
  target's jobs as first listed (so a resumed run reads the same jobs, with the same info).
- one directory per job: a family file per metric family (`<family>.jsonl`, one line per task:
  `[label names, label values, [[t, v], ...]]`) and a `journal` whose every line names one task
  written and the size of every family file once it was. A line is the task's commit: a kill
  mid-task leaves a partial line or longer family files, and opening the job cuts both back to
  the last whole journal line. Spilled per family, the output is written one (job, family) at a
  time, so memory is one job's week of one family, not the whole backfill.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exporter.providers.kit.history import Facts, JobRef, Series

VERSION = 1
JOURNAL = "journal"
FAMILY_SUFFIX = ".jsonl"


class StateMismatch(Exception):
    """The state beside the output is another run's."""


def state_dir(output: Path) -> Path:
    return output.with_name(output.name + ".state")


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Every whole line of the journal at `path` (none when it is missing), each a JSON
    object; the file is cut back before the first line that is not one (a kill mid-write)."""
    if not path.exists():
        return []
    records = []
    good = 0
    with path.open("rb") as lines:
        for line in lines:
            try:
                record = json.loads(line) if line.endswith(b"\n") else None
            except ValueError:
                record = None
            if not isinstance(record, dict):
                break
            good += len(line)
            records.append(record)
    os.truncate(path, good)
    return records


@dataclass(slots=True)
class Entry:
    key: str
    points: int
    facts: Facts | None


class JobState:
    """One job's written tasks and family files."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.done: dict[str, Entry] = {}
        self.facts: Facts | None = None
        self._sizes: dict[str, int] = {}
        self._recover()

    def _recover(self) -> None:
        for record in read_journal(self.path / JOURNAL):
            entry = Entry(record["key"], int(record["points"]), record.get("facts"))
            self.done[entry.key] = entry
            if entry.facts is not None:
                self.facts = entry.facts
            self._sizes = {k: int(v) for k, v in record["sizes"].items()}
        for file in self.path.glob("*" + FAMILY_SUFFIX):
            family = file.name.removesuffix(FAMILY_SUFFIX)
            size = self._sizes.get(family, 0)
            if file.stat().st_size != size:
                os.truncate(file, size)

    @property
    def order(self) -> tuple[str, int]:
        """(target directory, job index): where the job stands in the run's lists."""
        return self.path.parent.name, int(self.path.name[1:])

    @property
    def points(self) -> int:
        return sum(e.points for e in self.done.values())

    def commit(self, key: str, series: list[Series], facts: Facts | None = None) -> int:
        """Append `series` as task `key` written; the points it held."""
        by_family: dict[str, list[Series]] = {}
        for s in series:
            if s.points:
                by_family.setdefault(s.name, []).append(s)
        points = 0
        for family, items in by_family.items():
            with (self.path / (family + FAMILY_SUFFIX)).open("a", encoding="utf-8") as out:
                for s in items:
                    out.write(json.dumps([s.label_names, s.label_values, s.points]) + "\n")
                    points += len(s.points)
                out.flush()
                self._sizes[family] = out.tell()
        record = {"key": key, "points": points, "sizes": self._sizes}
        if facts is not None:
            record["facts"] = facts
            self.facts = facts
        with (self.path / JOURNAL).open("a", encoding="utf-8") as journal:
            journal.write(json.dumps(record) + "\n")
        self.done[key] = Entry(key, points, facts)
        return points

    def families(self) -> list[str]:
        return sorted(self._sizes)

    def read(self, family: str) -> Iterator[tuple[tuple[str, ...], tuple[str, ...], list[Any]]]:
        file = self.path / (family + FAMILY_SUFFIX)
        if family not in self._sizes or not file.exists():
            return
        with file.open(encoding="utf-8") as lines:
            for line in lines:
                names, values, points = json.loads(line)
                yield tuple(names), tuple(values), points


class RunState:
    def __init__(self, path: Path, data: dict[str, Any]) -> None:
        self.path = path
        self._data = data
        self.resumed = False

    @classmethod
    def open(cls, output: Path, params: Mapping[str, Any], since: float, until: float) -> RunState:
        """The state of the run `params` describe: the one on disk when it is that run's
        (then its window holds), a new one otherwise; StateMismatch when another run's is
        there."""
        path = state_dir(output)
        run = path / "run.json"
        if run.exists():
            try:
                data = json.loads(run.read_text(encoding="utf-8"))
            except ValueError:
                data = None
            if not isinstance(data, dict) or data.get("params") != dict(params):
                raise StateMismatch(
                    f"{path} holds another backfill's state (other options or version); "
                    "run that command again to finish it, or delete the directory"
                )
            state = cls(path, data)
            state.resumed = True
            return state
        path.mkdir(parents=True, exist_ok=True)
        data = {"version": VERSION, "params": dict(params), "since": since, "until": until}
        data["targets"] = {}
        state = cls(path, data)
        state._save()
        return state

    @property
    def since(self) -> float:
        return float(self._data["since"])

    @property
    def until(self) -> float:
        return float(self._data["until"])

    def _save(self) -> None:
        tmp = self.path / "run.json.tmp"
        tmp.write_text(json.dumps(self._data), encoding="utf-8")
        os.replace(tmp, self.path / "run.json")

    def jobs(self, target: str) -> list[JobRef] | None:
        listed = self._data["targets"].get(target)
        if listed is None:
            return None
        return [JobRef(job_id, data) for job_id, data in listed["jobs"]]

    def set_jobs(self, target: str, jobs: list[JobRef]) -> None:
        index = len(self._data["targets"])
        self._data["targets"][target] = {
            "dir": f"t{index}",
            "jobs": [[j.job_id, dict(j.data)] for j in jobs],
        }
        self._save()

    def job(self, target: str, index: int) -> JobState:
        return JobState(self.path / self._data["targets"][target]["dir"] / f"j{index}")

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
