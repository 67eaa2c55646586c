"""Fake Baidu AIHC OpenAPI: DescribeJobs, DescribeJob, DescribeJobMetrics and job events.

It answers the way the provider pages (`shared/provider-docs/aihc-*.txt`) and users' notes say
the real service does: every request must carry a valid bce-auth-v1 signature (checked with
the same algorithm the exporter signs with; wrong keys get 403, stale signatures 400
RequestExpired), DescribeJobs pages with `totalCount`, DescribeJob comes in both documented
shapes, DescribeJobMetrics serves all 22 metric types and refuses numeric
`startTime`/`endTime`/`timeStep` with 400 MalformedJSON, and replies carry the secret-bearing
fields (`imageConfig`, `envs`, `command`, `labels`) the exporter must never export. Every such
secret contains `SECRET_MARK`, so a test can grep for it.

Two kinds of world:

- `AihcWorld(seed=42)`: lively. Jobs are created every few minutes in each queue, start,
  run with 1-4 pods, then succeed, fail or are stopped, and leave the list some time after
  they finish. Job k of a pool is a pure function of (seed, pool, k), so a given seed shows
  the same jobs at the same wall-clock time in every process.
- `AihcWorld.fixed(pools=..., jobs=23, status="Running")`: an exact shape for tests, whose
  jobs, pods and values tests edit freely (`world.jobs`, `SimJob.values`, `SimPod.samples`).

Every name a reply carries (job ids, names, queues, pods, nodes, IPs, statuses, phases, event
types and reasons via `SimJob.event_items`) can hold any string, invalid bytes included (see
`exporter.simulator.core.raw`); such names work in requests too (signatures, paths, bodies).
DescribeJobs and DescribeJob also carry the job-wide `gpuUtilizationPercent`,
`gpuMemoryUtilizationPercent` and `runTimeNanoseconds` that live replies carry beyond the
documented tables, for the jobs whose `SimJob.stats` is set (`aihc_replies.job_stats`).

Faults a training operator looks for can be planted (`AihcWorld.plant`, seeded): a slow rank,
a throttled card, a hung job and an idle job (`aihc_jobs.PLANTED`, `planted_value`); a slow
rank or a throttled card hits a worker. A world with planted faults keeps every job's pods in step
(`AihcWorld.in_step`), as the ranks of a synchronous job are, so the planted ones are the only
outliers.

Job items and pods come in either spelling (`AihcWorld.spelling`): the documentation's
examples' (`jobId`, `queueId`, `jobSpec`, `podPhase`) or that of Baidu's generated SDK,
`baiducloud-python-sdk-aihc` 0.0.4 (`jobid`, `queue`, `Job`, `datasources`, `historyPods`,
`jobTimeLine`, pods with `status` and `creationAt` and no `podPhase`).

This module is the world: what the service knows. The reply bodies it builds from that are
`exporter.simulator.aihc_replies`; the jobs' and pods' life and values are
`exporter.simulator.aihc_jobs`; the HTTP API that checks signatures and answers the actions is
`exporter.simulator.aihc_api` (`register_aihc`).
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from exporter.simulator.aihc_jobs import (
    ANCHOR,
    PLANTED,
    TERMINAL_STATUSES,
    Pace,
    SimJob,
    SimPod,
    lively_job,
    rfc3339,
)

DEMO_ACCESS_KEY_ID = "AKDEMO0b7e4f1a9c2d"
DEMO_SECRET_ACCESS_KEY = "SKDEMO5c8a1f3e7b90d24"
DEMO_RESOURCE_POOL = "cce-demo0001"

# Part of every secret-bearing value the simulator serves.
SECRET_MARK = "SIMSECRET"

Shape = Literal["top", "nested", "alternate"]
Spelling = Literal["docs", "sdk"]

DEFAULT_POOLS: Mapping[str, Sequence[str]] = {
    DEMO_RESOURCE_POOL: ("default", "llm-pretrain", "research"),
    "cce-demo0002": ("default",),
    "aihc-serverless": ("aihcq-7f3k2m9x",),
}


class AihcWorld:
    """What the fake service knows: credentials, pools and queues, jobs, and reply knobs."""

    def __init__(
        self,
        seed: int = 1,
        *,
        pools: Mapping[str, Sequence[str]] | None = None,
        lively: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.seed = seed
        self.pools: dict[str, list[str]] = {p: list(q) for p, q in (pools or DEFAULT_POOLS).items()}
        self.lively = lively
        self.clock = clock
        self.credentials: dict[str, str] = {DEMO_ACCESS_KEY_ID: DEMO_SECRET_ACCESS_KEY}
        # Jobs added by hand (all of them in a fixed world), by id, in creation order.
        self.jobs: dict[str, SimJob] = {}
        # How DescribeJob nests its reply: "top" (the page's example), "nested" (its table).
        self.describe_job_shape: Shape = "alternate"
        # Field names of job items and pods: the documentation's or the SDK's (see above).
        self.spelling: Spelling = "docs"
        self.usage_unit: Literal["percent", "ratio"] = "percent"
        # Called with (pool, queue, page number) before a DescribeJobs page is answered.
        self.before_page: Callable[[str, str | None, int], None] | None = None
        # Called with (action, body) before any v2 action (and "events") is answered: it may
        # change the body (a test serving page 1 for every page) or raise ServiceError.
        self.before_action: Callable[[str, dict[str, Any]], None] | None = None
        # Every DescribeJobMetrics body received, for tests of the windows asked (a fixed world
        # only: a lively one serves for days).
        self.metric_requests: list[dict[str, Any]] = []
        # Pods of a job in step (`metric_value`); `plant` sets it.
        self.in_step = False
        self._pace = Pace()
        self._lively_cache: dict[tuple[str, int], SimJob] = {}
        self._shape_flip = itertools.count()
        # Numbers jobs added by hand: never reused, so a job added after one was removed
        # cannot take the id of one still there.
        self._added = itertools.count()

    @classmethod
    def fixed(
        cls,
        seed: int = 1,
        *,
        pools: Mapping[str, Sequence[str]] | None = None,
        jobs: int = 0,
        status: str = "Running",
        pods_per_job: int = 2,
        clock: Callable[[], float] = time.time,
    ) -> AihcWorld:
        """A world of exactly `jobs` jobs, spread round-robin over the pools' queues."""
        world = cls(seed, pools=pools or {"cce-test0001": ["default"]}, lively=False, clock=clock)
        slots = [(p, q) for p, queues in world.pools.items() for q in queues]
        now = clock()
        for i in range(jobs):
            pool, queue = slots[i % len(slots)]
            world.add_job(
                pool=pool,
                queue=queue,
                status=status,
                pods=pods_per_job,
                # A second apart, the newest a second old, however many there are.
                created_at=now - max(3600, jobs) + i,
            )
        return world

    def add_job(
        self,
        *,
        pool: str | None = None,
        queue: str | None = None,
        status: str = "Running",
        pods: int | Sequence[SimPod] = 2,
        name: str | None = None,
        job_id: str | None = None,
        created_at: float | None = None,
        finished_at: str | None = None,
        stats: bool | None = None,
        ended_at: float | None = None,
    ) -> SimJob:
        """A job of fixed `status`; with `ended_at`, one that runs from `created_at` until then
        and has `status` (a terminal one) after: its history is served (backfill tests)."""
        pool = pool or next(iter(self.pools))
        queue = queue or self.pools[pool][0]
        n = next(self._added)
        rng = random.Random(f"{self.seed}:fixed:{n}")
        job_id = job_id or "job-" + "".join(rng.choices("abcdefghijkmnpqrstuvwxyz23456789", k=12))
        created = created_at if created_at is not None else self.clock() - 600
        job = SimJob(
            job_id=job_id,
            name=name if name is not None else f"train-{n:03d}",
            pool=pool,
            queue=queue,
            created_at=created,
            timeline=_fixed_timeline(created, status, ended_at),
            pods=_fixed_pods(job_id, n, pods) if isinstance(pods, int) else list(pods),
            status=status if ended_at is None else None,
            finished_at=finished_at,
            # Every other job carries the job-wide figures, unless told.
            stats=n % 2 == 0 if stats is None else stats,
        )
        self.jobs[job_id] = job
        return job

    def plant(self, fault: str, *, pods: int = 4, pool: str | None = None) -> SimJob:
        """A new Running job of `pods` pods with `fault` (one of PLANTED), running for an hour
        already (past any warm-up), its pods in step with each other, as every job of this
        world from now on. Which pod a slow rank or a throttled card hits follows from the
        seed."""
        if fault not in PLANTED:
            raise ValueError(f"no fault {fault!r} (have {', '.join(PLANTED)})")
        self.in_step = True
        job = self.add_job(
            pool=pool,
            pods=pods,
            name=f"planted-{fault}",
            stats=True,
            created_at=self.clock() - 3600,
        )
        job.fault = fault
        rng = random.Random(f"{self.seed}:plant:{fault}:{job.job_id}")
        # A worker: pods are ranked against their own replica type, and a master is alone.
        workers = [p for p in job.pods if p.replica_type == "worker"] or job.pods
        job.fault_pod = workers[rng.randrange(len(workers))].name
        return job

    def set_status(self, job_id: str, status: str) -> None:
        """Move a job added by hand to `status` from now on (a terminal one sets finishedAt)."""
        job = self.jobs[job_id]
        job.status = status
        job.finished_at = rfc3339(self.clock()) if status in TERMINAL_STATUSES else ""
        # The status timeline (jobTimeLine) goes on from here too.
        job.timeline.append((self.clock(), status))

    def remove_job(self, job_id: str) -> None:
        """The job leaves DescribeJobs, and its per-job calls answer 404 JobNotFound."""
        del self.jobs[job_id]

    # -- what the service sees ---------------------------------------------------------------

    def now(self) -> float:
        return self.clock()

    def jobs_in(self, pool: str, now: float | None = None) -> list[SimJob]:
        now = self.now() if now is None else now
        found = [j for j in self.jobs.values() if j.pool == pool and j.visible_at(now)]
        if self.lively and pool in self.pools:
            found += [j for j in self._lively_jobs(pool, now) if j.visible_at(now)]
        return found

    def job(self, job_id: str, now: float | None = None) -> SimJob | None:
        now = self.now() if now is None else now
        if job_id in self.jobs:
            job = self.jobs[job_id]
            return job if job.visible_at(now) else None
        if not self.lively:
            return None
        for pool in self.pools:
            for job in self.jobs_in(pool, now):
                if job.job_id == job_id:
                    return job
        return None

    def _lively_jobs(self, pool: str, now: float) -> Iterator[SimJob]:
        pace = self._pace
        # The serverless pool is quieter.
        if pool == "aihc-serverless":
            pace = Pace(every=1800.0, jitter=300.0)
        first = math.floor((now - pace.longest_life - ANCHOR) / pace.every) - 1
        last = math.floor((now + pace.jitter - ANCHOR) / pace.every) + 1
        for k in range(first, last + 1):
            key = (pool, k)
            job = self._lively_cache.get(key)
            if job is None:
                job = lively_job(self.seed, pool, self.pools[pool], k, pace)
                self._lively_cache[key] = job
            yield job
        # Jobs before the window never show again: a world that runs for days keeps its window.
        for old in [key for key in self._lively_cache if key[0] == pool and key[1] < first]:
            del self._lively_cache[old]

    def next_shape(self) -> Literal["top", "nested"]:
        if self.describe_job_shape != "alternate":
            return self.describe_job_shape
        if self.spelling == "sdk":
            # The SDK's DescribeJobResponse has the job under `job` only.
            return "nested"
        return "top" if next(self._shape_flip) % 2 == 0 else "nested"


def _fixed_timeline(created: float, status: str, ended_at: float | None) -> list[tuple[float, str]]:
    """`status` from `created` on; with `ended_at`, Running until then and `status` after."""
    if ended_at is None:
        return [(created, status)]
    return [(created, "Running"), (ended_at, status)]


def _fixed_pods(job_id: str, n: int, count: int) -> list[SimPod]:
    """`count` pods of the `n`th job added by hand: a master, then workers, on subnet `n`, every
    other one restarted once."""
    return [
        SimPod.nth(
            job_id,
            i,
            node=f"192.168.{n % 250}.{i + 2}",
            ip=f"10.{n % 250}.0.{i + 2}",
            restarts=i % 2,
        )
        for i in range(count)
    ]
