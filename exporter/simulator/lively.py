"""A lively Alaya world: jobs start, run, restart pods and finish, on the world's clock.

Like the lively AIHC world, job k is a pure function of (seed, k): created every EVERY seconds
(with jitter) in data centre 1 or 2 in turn, pending for a few minutes, running 1.5-3 h with
1-3 workers (`worker-0`...), then SUCCEEDED or FAILED, and listed for KEEP after that. Some
pods restart every so often while they run (`restartCount` grows). So any process can say
which jobs and pods the world holds at any time (`LivelyAlaya.running_at`, `listed_at`)
without asking it: the soak benchmark checks the exporter's series against exactly that.

The world keeps only the jobs around its clock (a window of job numbers), so it runs for days
without growing.
"""

from __future__ import annotations

import math
import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from exporter.simulator.alaya import AlayaWorld
from exporter.simulator.alaya_list import ListedJob
from exporter.simulator.alaya_pods import JobProfile, job_profile

EVERY = 1200.0
JITTER = 240.0
PENDING = (60.0, 300.0)
RUN = (5400.0, 10800.0)
KEEP = 4 * 3600.0
# A job's whole life in the list, at most: where the window starts.
LONGEST = JITTER + PENDING[1] + RUN[1] + KEEP
# An epoch for job numbering, so job k is the same in every process.
ANCHOR = 1_700_000_000.0
# Share of pods that restart while they run, and how often.
FLAKY = 0.25
RESTART_EVERY = 2400.0


def lively_job(seed: int, k: int) -> tuple[ListedJob, tuple[str, ...], JobProfile]:
    """Job k of the world of `seed`: its list entry, its pods and its profile."""
    rng = random.Random(f"alaya-lively:{seed}:{k}")
    created = ANCHOR + k * EVERY + rng.uniform(-JITTER, JITTER)
    start = created + rng.uniform(*PENDING)
    failed = rng.random() < 0.25
    end = start + rng.uniform(*RUN) * (rng.uniform(0.3, 0.9) if failed else 1.0)
    workers = rng.choice((1, 2, 2, 3))
    model = rng.choice(("llama3-8b", "qwen2-72b", "glm4-9b"))
    job = ListedJob(
        str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        f"{model}-{rng.choice(('sft', 'dpo'))}-{k % 1000:03d}",
        workers,
        created,
        start=start,
        end=end,
        end_status="FAILED" if failed else "SUCCEEDED",
        # Two data centres in turn: a benchmark can give each its own target.
        aidc_id=1 + k % 2,
        reason="OOMKilled: worker-0 exited with code 137" if failed else "Completed",
    )
    return job, tuple(f"worker-{i}" for i in range(workers)), job_profile(rng)


class LivelyAlaya(AlayaWorld):
    """An AlayaWorld whose jobs come and go with its clock (see the module docstring)."""

    def __init__(self, seed: int = 1, *, clock: Callable[[], float] = time.time) -> None:
        super().__init__(seed, job_count=0, clock=clock)
        self._history = list(self.listed)
        # k -> job k, for the window around the clock only.
        self._known: dict[int, tuple[ListedJob, tuple[str, ...], JobProfile]] = {}
        self.listed = _Listing(self)  # type: ignore[assignment]
        self.jobs = _Pods(self)  # type: ignore[assignment]
        self.profiles = _Profiles(self)  # type: ignore[assignment]

    def window(self, now: float | None = None) -> Iterator[tuple[ListedJob, tuple[str, ...]]]:
        """Every job listed at `now` (the clock's), newest first, with its pods."""
        now = self.clock() if now is None else now
        first = math.floor((now - LONGEST - ANCHOR) / EVERY) - 1
        last = math.floor((now + JITTER - ANCHOR) / EVERY) + 1
        for k in [k for k in self._known if k < first]:
            del self._known[k]
        for k in range(last, first - 1, -1):
            entry = self._known.get(k)
            if entry is None:
                entry = self._known[k] = lively_job(self.seed, k)
            job, pods, _ = entry
            if job.created <= now and (job.end is None or now < job.end + KEEP):
                yield job, pods

    def listed_at(self, now: float) -> dict[str, tuple[str, ...]]:
        """Job id -> pods of every job the list shows at `now`."""
        return {job.id: pods for job, pods in self.window(now)}

    def running_at(self, now: float) -> dict[str, tuple[str, ...]]:
        """Job id -> pods of every job RUNNING at `now`."""
        return {job.id: pods for job, pods in self.window(now) if job.status(now) == "RUNNING"}

    def profile(self, job_id: str) -> JobProfile:
        for job, _, profile in self._known.values():
            if job.id == job_id:
                return profile
        return job_profile(random.Random(job_id))

    def basic(self, job_id: str, pod: str) -> dict[str, Any]:
        data = super().basic(job_id, pod)
        flaky = random.Random(f"alaya-flaky:{self.seed}:{job_id}:{pod}")
        start = next((j.start for j, _ in self.window() if j.id == job_id), None)
        if start is not None and flaky.random() < FLAKY:
            ran = max(0.0, self.clock() - start)
            data["restartCount"] = int(data["restartCount"]) + int(ran // RESTART_EVERY)
        return data


class _Listing:
    """The world's `listed`: the jobs around its clock, then its fixed history."""

    def __init__(self, world: LivelyAlaya) -> None:
        self._world = world

    def __iter__(self) -> Iterator[ListedJob]:
        yield from (job for job, _ in self._world.window())
        yield from self._world._history


class _Pods(Mapping[str, list[str]]):
    """The world's `jobs`: job id -> pods, of the jobs listed now."""

    def __init__(self, world: LivelyAlaya) -> None:
        self._world = world

    def __getitem__(self, job_id: str) -> list[str]:
        for job, pods in self._world.window():
            if job.id == job_id:
                return list(pods)
        raise KeyError(job_id)

    def __iter__(self) -> Iterator[str]:
        return (job.id for job, _ in self._world.window())

    def __len__(self) -> int:
        return sum(1 for _ in self._world.window())


class _Profiles(Mapping[str, JobProfile]):
    def __init__(self, world: LivelyAlaya) -> None:
        self._world = world

    def __getitem__(self, job_id: str) -> JobProfile:
        return self._world.profile(job_id)

    def __iter__(self) -> Iterator[str]:
        return iter(self._world.jobs)

    def __len__(self) -> int:
        return len(self._world.jobs)
