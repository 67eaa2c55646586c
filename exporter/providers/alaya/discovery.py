"""Which jobs and pods an Alaya target polls.

Alaya's task list and task details are not documented for the API-key family, so the first
source is the configured list. A source that reads a list endpoint later implements the same
`JobSource` and plugs into `AlayaProvider` unchanged; one whose listing fails raises, and the
provider reports the poll as not listed (every previous job is then carried over).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from exporter.config import AlayaJob
from exporter.providers.base import PollContext


@dataclass(frozen=True, slots=True)
class JobTarget:
    job_id: str
    pods: tuple[str, ...]


class JobSource(Protocol):
    async def jobs(self, context: PollContext) -> Sequence[JobTarget]:
        """The jobs to poll now; raises when the list cannot be read."""
        ...

    def describe(self) -> dict[str, str]: ...


class StaticJobs:
    """The jobs and pods named in the target's configuration."""

    def __init__(self, jobs: Sequence[AlayaJob]) -> None:
        merged: dict[str, dict[str, None]] = {}
        # A job listed twice polls the union of its pods, each once.
        for job in jobs:
            merged.setdefault(job.id, {}).update(dict.fromkeys(job.pods))
        self._jobs = tuple(JobTarget(job_id, tuple(pods)) for job_id, pods in merged.items())

    async def jobs(self, context: PollContext) -> Sequence[JobTarget]:
        return self._jobs

    def describe(self) -> dict[str, str]:
        return {
            "jobs": str(len(self._jobs)),
            "pods": str(sum(len(j.pods) for j in self._jobs)),
            "discovery": "configured",
        }
