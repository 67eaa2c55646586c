"""Which jobs and pods an Alaya target polls.

Three sources, one `JobSource` protocol:

- the configured list (`jobs:`), and with it the watched `jobs_file` (`StaticJobs`, their
  union; see `jobsfile`);
- list discovery (`discovery: list`, `listing.ListDiscovery`): the jobs of Alaya's job list,
  whose pods come from `jobs` / `jobs_file` when they name the job, else from `pod_pattern`.

A source that cannot read its list at all raises, having logged (once per change) and
counted the failure itself; the provider then reports the poll as not listed, so every
previous job is carried over. A source keeps no state outside itself: a reloaded target
closes its old source and builds a new one from the new configuration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from exporter.providers.alaya.jobsfile import JobsFile
from exporter.providers.alaya.models import JobRecord
from exporter.providers.alaya.target import AlayaJob
from exporter.providers.base import PollContext


@dataclass(frozen=True, slots=True)
class JobTarget:
    job_id: str
    pods: tuple[str, ...]
    # The job list's record, when the job came from it: the provider exports the job-level
    # series (info, status, times, replicas) from it. None for configured jobs.
    record: JobRecord | None = None


class JobSource(Protocol):
    async def jobs(self, context: PollContext) -> Sequence[JobTarget]:
        """The jobs to poll now; raises when the list cannot be read."""
        ...

    def describe(self) -> dict[str, str]: ...

    async def close(self) -> None: ...


def merge_jobs(jobs: Sequence[AlayaJob]) -> dict[str, tuple[str, ...]]:
    """Job id -> pods; a job listed twice polls the union of its pods, each once."""
    merged: dict[str, dict[str, None]] = {}
    for job in jobs:
        merged.setdefault(job.id, {}).update(dict.fromkeys(job.pods))
    return {job_id: tuple(pods) for job_id, pods in merged.items()}


class StaticJobs:
    """The jobs and pods named in the target's configuration, and in its jobs file."""

    def __init__(self, jobs: Sequence[AlayaJob], file: JobsFile | None = None) -> None:
        self._configured = tuple(jobs)
        self._file = file
        self._generation = -1
        self._named: dict[str, tuple[str, ...]] = {}
        self._jobs: tuple[JobTarget, ...] = ()
        self._rebuild()

    async def named(self) -> dict[str, tuple[str, ...]]:
        """Job id -> pods of every job named, the file re-read if it changed."""
        if self._file is not None:
            await self._file.refresh()
            if self._file.generation != self._generation:
                self._rebuild()
        return self._named

    async def jobs(self, context: PollContext) -> Sequence[JobTarget]:
        await self.named()
        return self._jobs

    def _rebuild(self) -> None:
        from_file = self._file.jobs if self._file is not None else ()
        self._generation = self._file.generation if self._file is not None else 0
        self._named = merge_jobs((*self._configured, *from_file))
        self._jobs = tuple(JobTarget(job_id, pods) for job_id, pods in self._named.items())

    def describe(self) -> dict[str, str]:
        facts = {
            "jobs": str(len(self._jobs)),
            "pods": str(sum(len(j.pods) for j in self._jobs)),
            "discovery": "configured",
        }
        if self._file is not None:
            facts["discovery"] = "configured + jobs file" if self._configured else "jobs file"
            facts["jobs file"] = str(self._file.path)
        return facts

    async def close(self) -> None:
        return None
