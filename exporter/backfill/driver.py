"""Reads every window of every job, target by target, under each target's own client.

Targets run side by side (each has its own budget); within one, `JOB_WORKERS` jobs at a time,
each job's windows in turn. First every job is described (one call for AIHC, one per pod for
Alaya), so the total of windows, and the time left, is known early. A window the provider has
nothing for (404) is written empty. A job whose call fails after its retries stops there and
is reported; the others go on. A target stops when its credentials are refused, or when
`STOP_AFTER` jobs in a row failed (a 429 storm): its remaining windows are left for the next
run, which reads nothing already written.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Final, TypeVar

from exporter.backfill.progress import Progress
from exporter.backfill.state import JobState, RunState
from exporter.providers.kit.history import HistoryReader, HistoryUnavailable, JobRef, Series, Task
from exporter.transport.iface import ApiError, CallDropped, CallSkipped

T = TypeVar("T")

JOB_WORKERS: Final = 4
STOP_AFTER: Final = 3
DESCRIBE_KEY: Final = "describe"


class TargetStopped(Exception):
    pass


def when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class Outcome:
    problems: list[str] = field(default_factory=list)
    # Jobs whose every window is written.
    complete: list[JobState] = field(default_factory=list)
    written: list[JobState] = field(default_factory=list)
    windows_left: int = 0
    listed: bool = True

    @property
    def ok(self) -> bool:
        return not self.problems and self.listed and self.windows_left == 0


class _Target:
    def __init__(
        self,
        reader: HistoryReader,
        state: RunState,
        progress: Progress,
        outcome: Outcome,
        calls: Callable[[], int],
        workers: int,
    ) -> None:
        self.reader = reader
        self.state = state
        self.progress = progress
        self.outcome = outcome
        self.calls = calls
        self.workers = workers
        self.failed_in_row = 0
        self.stopped: str | None = None
        # The first job and window the stop left unread.
        self.where: str | None = None

    async def guarded(self, call: Callable[[], Awaitable[T]]) -> T:
        """`call()`, again after a Retry-After pause that outlasted its deadline;
        TargetStopped once credentials are refused."""
        while True:
            if self.stopped is not None:
                raise TargetStopped(self.stopped)
            try:
                return await call()
            except CallDropped:
                await self.reader.gate.resumed()
            except CallSkipped:
                self._stop("credentials refused")
            except ApiError as exc:
                if exc.auth and self.reader.gate.blocked:
                    self._stop(f"credentials refused ({exc.code}: {exc.message})")
                raise

    def _stop(self, why: str) -> None:
        if self.stopped is None:
            self.stopped = why
        raise TargetStopped(self.stopped)

    def _failed(self, ref: JobRef, what: str, exc: Exception) -> None:
        self.outcome.problems.append(
            f"{self.reader.provider} target {self.reader.target}: job {ref.job_id}: {what}: {exc}"
        )
        self.failed_in_row += 1
        if self.failed_in_row >= STOP_AFTER and self.stopped is None:
            self.stopped = f"{STOP_AFTER} jobs in a row failed (last: {exc})"

    async def run(self, filter_jobs: set[str] | None) -> None:
        target = self.reader.target
        jobs = self.state.jobs(target)
        if jobs is None:
            try:
                jobs = list(await self.guarded(lambda: self.reader.jobs(*self._window)))
            except Exception as exc:
                # Any failure of the list (a reply the reader cannot use included) is this
                # target's alone, reported on one line.
                why = "credentials refused" if self.reader.gate.blocked else str(exc)
                self.outcome.listed = False
                self.outcome.problems.append(
                    f"{self.reader.provider} target {target}: jobs not listed: {why}"
                )
                return
            self.state.set_jobs(target, jobs)
        chosen = [(i, j) for i, j in enumerate(jobs) if not filter_jobs or j.job_id in filter_jobs]
        self.progress.add_jobs(len(chosen))
        opened = [(self.state.job(target, i), ref) for i, ref in chosen]
        await self._each(opened, self._describe)
        await self._each(opened, self._windows)
        # In the jobs' order, whatever order the workers took them in: the same file each run.
        self.outcome.written += [job for job, _ in opened if job.facts is not None]
        if self.stopped is not None:
            self.outcome.problems.append(
                f"{self.reader.provider} target {target} stopped at {self.where or 'its start'}"
                f": {self.stopped}"
            )

    @property
    def _window(self) -> tuple[float, float]:
        return self.state.since, self.state.until

    async def _each(
        self,
        jobs: Sequence[tuple[JobState, JobRef]],
        work: Callable[[JobState, JobRef], Awaitable[None]],
    ) -> None:
        queue = list(reversed(jobs))

        async def worker() -> None:
            while queue and self.stopped is None:
                job, ref = queue.pop()
                try:
                    await work(job, ref)
                except TargetStopped:
                    return

        await asyncio.gather(*(worker() for _ in range(max(1, self.workers))))

    async def _describe(self, job: JobState, ref: JobRef) -> None:
        if job.facts is not None:
            return
        try:
            described = await self.guarded(lambda: self.reader.describe(ref, *self._window))
        except (ApiError, TargetStopped) as exc:
            if isinstance(exc, ApiError):
                self._failed(ref, "not described", exc)
            if self.stopped is not None and self.where is None:
                self.where = f"job {ref.job_id} (not described yet)"
            return
        job.commit(DESCRIBE_KEY, described.series, described.facts)
        self.failed_in_row = 0

    async def _windows(self, job: JobState, ref: JobRef) -> None:
        if job.facts is None:
            return
        tasks = self.reader.tasks(ref, job.facts, *self._window)
        left = [t for t in tasks if t.key not in job.done]
        # Windows an earlier run wrote are not this run's work: the time left is the rest's.
        self.progress.add_windows(len(left))
        self.progress.points += job.points
        for n, task in enumerate(left):
            try:
                series = await self.guarded(partial(self._read, ref, job, task))
            except (ApiError, TargetStopped) as exc:
                self.outcome.windows_left += len(left) - n
                window = " ".join(filter(None, (task.item, task.unit, "window from")))
                window += f" {when(task.start)}"
                if isinstance(exc, ApiError):
                    self._failed(ref, window, exc)
                if self.stopped is not None and self.where is None:
                    self.where = f"job {ref.job_id}, {window}"
                return
            points = job.commit(task.key, series)
            self.progress.window_done(points, self.calls())
            self.failed_in_row = 0
        self.outcome.complete.append(job)
        self.progress.job_done(self.calls())

    async def _read(self, ref: JobRef, job: JobState, task: Task) -> list[Series]:
        assert job.facts is not None
        try:
            return await self.reader.read(ref, job.facts, task)
        except HistoryUnavailable:
            return []


async def backfill(
    readers: Sequence[HistoryReader],
    state: RunState,
    progress: Progress,
    *,
    jobs: set[str] | None = None,
    workers: int = JOB_WORKERS,
) -> Outcome:
    outcome = Outcome()

    def calls() -> int:
        return sum(r.gate.sent for r in readers)

    targets = [_Target(r, state, progress, outcome, calls, workers) for r in readers]
    await asyncio.gather(*(t.run(jobs) for t in targets))
    return outcome
