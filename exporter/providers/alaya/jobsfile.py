"""`jobs_file`: a YAML or JSON file of Alaya jobs, re-read when it changes.

The file holds what `jobs:` holds in the configuration: the list itself (`[{id, pods}]`, the
shape of Prometheus' file_sd files), or a mapping with that list under `jobs`. Each poll
stats it, as Prometheus' file_sd does, and re-reads it only when its identity (device, inode)
or its mtime or size changed: an edit in place and an atomic replace (write a temporary
file, rename it over) are both seen, at the cost of one stat per poll. A file that is
missing or does not validate keeps the last good list: the problems are logged once per
change, one line per key as the configuration's are, and every poll that cannot use the
file counts in `training_exporter_discovery_errors_total`.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from exporter.configfile import ConfigError, read_yaml_value, type_name, validation_problems
from exporter.configkit import StrictModel
from exporter.logs import OnChange, get_logger
from exporter.providers.alaya.target import NAME, AlayaJob
from exporter.selfmetrics import SelfMetrics

log = get_logger(__name__)

# 10,000 jobs of 2 pods are 0.8 MB of YAML or JSON. The config reader (libyaml, bounded, see
# exporter/configfile.py) takes about 0.3 s a MiB; the read still runs in a thread, so a big
# file never holds the loop, and 1 MiB caps it.
MAX_FILE_BYTES = 1024 * 1024
MAX_JOBS = 10_000
MAX_PODS_PER_JOB = 1_024

# Kubernetes names are at most 253 characters; job ids are UUIDs.
PodName = Annotated[str, Field(min_length=1, max_length=253)]


class FileJob(StrictModel):
    id: str = Field(min_length=1, max_length=256)
    pods: list[PodName] = Field(min_length=1, max_length=MAX_PODS_PER_JOB)


class JobsDocument(StrictModel):
    jobs: list[FileJob] = Field(default=[], max_length=MAX_JOBS)


def read_document(path: Path, size: int) -> Any:
    """The file's top-level value, or ConfigError. The one place the config reader is used:
    when it takes a size cap itself, the check here becomes its argument."""
    if size > MAX_FILE_BYTES:
        raise ConfigError([f"config: {path} is {size} bytes, more than {MAX_FILE_BYTES}"])
    return read_yaml_value(path, max_bytes=MAX_FILE_BYTES)


def parse_jobs(path: Path, size: int) -> tuple[AlayaJob, ...]:
    """The jobs of the file; ConfigError with one line per problem (`jobs[2].pods: ...`, or
    `[2].pods: ...` in a plain list)."""
    data = read_document(path, size)
    plain = isinstance(data, list)
    if data is not None and not plain and not isinstance(data, dict):
        problem = f"{path} must hold a list of jobs or a mapping, not a {type_name(data)}"
        raise ConfigError([f"config: {problem}"])
    try:
        document = JobsDocument.model_validate({"jobs": data} if plain else data or {})
    except ValidationError as exc:
        problems = validation_problems(exc)
        if plain:
            problems = [p.removeprefix("jobs") if p.startswith("jobs[") else p for p in problems]
        raise ConfigError(problems) from None
    return tuple(AlayaJob(id=job.id, pods=job.pods) for job in document.jobs)


class JobsFile:
    """The last good jobs of one target's `jobs_file`; per target, nothing global, so a
    reloaded target builds a new one from its new path."""

    def __init__(self, path: Path, target: str, metrics: SelfMetrics) -> None:
        self.path = path
        self.target = target
        self._errors = metrics.discovery_errors.labels(NAME, target)
        # What was last read (good or bad): (device, inode, mtime in ns, size).
        self._seen: tuple[int, int, int, int] | None = None
        self.jobs: tuple[AlayaJob, ...] = ()
        # Incremented on every good read, so users of `jobs` know when to rebuild.
        self.generation = 0
        # Why the file was last not used; None while it is.
        self._problems: OnChange[tuple[str, ...] | None] = OnChange(None)

    async def refresh(self) -> tuple[AlayaJob, ...]:
        """Re-read the file if it changed; the last good jobs either way."""
        try:
            stat = os.stat(self.path)
        except OSError as exc:
            self._seen = None
            reason = "file not found" if isinstance(exc, FileNotFoundError) else exc.strerror
            self._fail([f"jobs_file: {reason}: {self.path}"])
            return self.jobs
        seen = (stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if seen != self._seen:
            self._seen = seen
            try:
                jobs = await asyncio.to_thread(parse_jobs, self.path, stat.st_size)
            except ConfigError as exc:
                self._fail([_as_jobs_file(p) for p in exc.problems])
                return self.jobs
            self._succeed(jobs)
        elif self._problems.last() is not None:
            # Unchanged since a bad read: still bad, still counted, not logged again.
            self._errors.inc()
        return self.jobs

    def _fail(self, problems: list[str]) -> None:
        self._errors.inc()
        if self._problems.changed(tuple(problems)):
            log.warning(
                "alaya jobs file not used; the last good list is kept",
                target=self.target,
                path=str(self.path),
                jobs_kept=len(self.jobs),
                problems=problems,
            )

    def _succeed(self, jobs: tuple[AlayaJob, ...]) -> None:
        recovered = self._problems.changed(None)
        if recovered or jobs != self.jobs:
            before, after = {j.id for j in self.jobs}, {j.id for j in jobs}
            log.info(
                "alaya jobs file read",
                target=self.target,
                path=str(self.path),
                jobs=len(jobs),
                pods=sum(len(j.pods) for j in jobs),
                added=len(after - before),
                removed=len(before - after),
            )
        self.jobs = jobs
        self.generation += 1


def _as_jobs_file(problem: str) -> str:
    # The config reader names the file `config`; here it is the target's jobs_file.
    return (
        "jobs_file: " + problem.removeprefix("config: ")
        if problem.startswith("config: ")
        else problem
    )
