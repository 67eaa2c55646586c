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
documented tables, for the jobs whose `SimJob.stats` is set (`AihcWorld.job_stats`).

Faults a training operator looks for can be planted (`AihcWorld.plant`, seeded): a slow rank,
a throttled card, a hung job and an idle job (`aihc_jobs.PLANTED`, `planted_value`); a slow
rank or a throttled card hits a worker. A world with planted faults keeps every job's pods in step
(`AihcWorld.in_step`), as the ranks of a synchronous job are, so the planted ones are the only
outliers.

Job items and pods come in either spelling (`AihcWorld.spelling`): the documentation's
examples' (`jobId`, `queueId`, `jobSpec`, `podPhase`) or that of Baidu's generated SDK,
`baiducloud-python-sdk-aihc` 0.0.4 (`jobid`, `queue`, `Job`, `datasources`, `historyPods`,
`jobTimeLine`, pods with `status` and `creationAt` and no `podPhase`).

This module is the world: what the service knows and the reply bodies it builds. The jobs' and
pods' life and values are `exporter.simulator.aihc_jobs`; the HTTP API that checks signatures
and answers the actions is `exporter.simulator.aihc_api` (`register_aihc`).
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

from exporter.providers.aihc.target import USAGE_TYPES
from exporter.simulator.aihc_jobs import (
    ANCHOR,
    PLANTED,
    TERMINAL_STATUSES,
    Pace,
    SimJob,
    SimPod,
    go_time,
    lively_job,
    metric_value,
    planted_value,
    pod_phase,
    restarts_at,
    rfc3339,
    run_end,
    time_line,
    unit,
    value_text,
)

DEMO_ACCESS_KEY_ID = "AKDEMO0b7e4f1a9c2d"
DEMO_SECRET_ACCESS_KEY = "SKDEMO5c8a1f3e7b90d24"
DEMO_RESOURCE_POOL = "cce-demo0001"

# Part of every secret-bearing value the simulator serves.
SECRET_MARK = "SIMSECRET"

MAX_POINTS = 1000

Shape = Literal["top", "nested", "alternate"]
Spelling = Literal["docs", "sdk"]

# The job item's keys the SDK spells otherwise; the others are the same in both.
_SDK_JOB_KEYS = {
    "jobId": "jobid",
    "queueId": "queue",
    "jobSpec": "Job",
    "dataSources": "datasources",
    "enableFaultTolerant": "enableFaultTolerance",
    "faultTolerantArgs": "faultToleranceArgs",
}


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
        if isinstance(pods, int):
            pod_list = [
                SimPod(
                    f"{job_id}-{'master' if i == 0 else 'worker'}-{0 if i == 0 else i - 1}",
                    replica_type="master" if i == 0 else "worker",
                    node=f"192.168.{n % 250}.{i + 2}",
                    ip=f"10.{n % 250}.0.{i + 2}",
                    restarts=i % 2,
                )
                for i in range(pods)
            ]
        else:
            pod_list = list(pods)
        created = created_at if created_at is not None else self.clock() - 600
        job = SimJob(
            job_id=job_id,
            name=name if name is not None else f"train-{n:03d}",
            pool=pool,
            queue=queue,
            created_at=created,
            timeline=[(created, status)]
            if ended_at is None
            else [
                (created, "Running"),
                (ended_at, status),
            ],
            pods=pod_list,
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

    # -- reply bodies ------------------------------------------------------------------------

    def job_stats(self, job: SimJob, now: float) -> dict[str, Any]:
        """The job-wide figures its list and detail replies carry (none when not `stats`):
        GPU and GPU memory utilisation in percent (a level per job while it runs, 0 when it
        does not) and the time it has run, in nanoseconds."""
        if job.stats_override is not None:
            return dict(job.stats_override)
        if not job.stats:
            return {}
        running = job.status_at(now) == "Running"
        since = job.running_since(now)
        ran = 0.0 if since is None else max(0.0, run_end(job, now) - since)
        return {
            "gpuUtilizationPercent": self.job_gpu_percent(job, "gpu") if running else 0.0,
            "gpuMemoryUtilizationPercent": self.job_gpu_percent(job, "memory") if running else 0.0,
            "runTimeNanoseconds": int(ran * 1e9),
        }

    def job_gpu_percent(self, job: SimJob, what: Literal["gpu", "memory"]) -> float:
        low, high = (55.0, 97.0) if what == "gpu" else (40.0, 90.0)
        return round(low + (high - low) * unit(self.seed, job.job_id, f"job-{what}"), 2)

    def job_item(self, job: SimJob, now: float) -> dict[str, Any]:
        """A JobItem as DescribeJobs lists it, secret-bearing fields included."""
        item: dict[str, Any] = {
            **self.job_stats(job, now),
            "jobId": job.job_id,
            "userId": job.user_id,
            "name": job.name,
            "status": job.status_at(now),
            "createdAt": job.created_at_text
            if job.created_at_text is not None
            else rfc3339(job.created_at),
            "finishedAt": job.finished_at_at(now),
            "jobType": job.job_type,
            "resourcePoolId": job.pool,
            "queueId": job.queue,
            "jobSpec": {
                "image": job.image,
                "imageConfig": {
                    "username": f"robot-{SECRET_MARK}",
                    "password": f"{SECRET_MARK}-pw",
                },
                "replicas": len(job.pods),
                "resources": []
                if job.gpus is None
                else [{"name": "baidu.com/a800_80g_cgpu", "quantity": job.gpus}],
                "envs": _envs(job),
                "enableRDMA": True,
                "hostNetwork": False,
            },
            "command": f"torchrun --nproc_per_node 8 train.py --hf-token {SECRET_MARK}-hf",
            "labels": [
                {"key": "aijob.cce.baidubce.com/ai-user-id", "value": f"{SECRET_MARK}-uid"},
                {"key": "team-secret", "value": f"{SECRET_MARK}-label"},
            ],
            "priority": job.priority,
            "dataSources": [],
            "enableBccl": False,
            "enableBcclErrorReason": "",
            "enableFaultTolerant": False,
            "faultTolerantArgs": "--enable-hang-detection=false",
        }
        if self.spelling == "sdk":
            item = {_SDK_JOB_KEYS.get(k, k): v for k, v in item.items()}
            item["historyPods"] = []
            item["jobTimeLine"] = time_line(job, now)
        return item

    def pod_item(self, job: SimJob, pod: SimPod, index: int, now: float) -> dict[str, Any]:
        phase = pod_phase(job, pod, index, now)
        item: dict[str, Any] = {
            "PodIP": pod.ip,
            "nodeName": pod.node,
            "creationTimestamp": rfc3339(job.created_at + 3),
            "uid": f"{unit(job.job_id, pod.name):.16f}"[2:],
            "name": pod.name,
            "podPhase": phase,
            "status": phase,
            "replicaType": pod.replica_type,
            "restartCount": restarts_at(job, pod, now),
            "envs": _envs(job),
            "finishedAt": job.finished_at_at(now),
            "reason": pod.reason,
        }
        if self.spelling == "sdk":
            del item["podPhase"]
            item["creationAt"] = item.pop("creationTimestamp")
        return item

    def pods_at(self, job: SimJob, now: float) -> list[dict[str, Any]]:
        if job.status is None and job.status_at(now) == "Stopped":
            return []
        return [self.pod_item(job, pod, i, now) for i, pod in enumerate(job.pods)]

    def metric_series(
        self, job: SimJob, metric_type: str, start: int, end: int, step: int
    ) -> list[dict[str, Any]]:
        end = min(end, int(self.now()))
        first = math.ceil(start / step) * step
        times = list(range(first, end + 1, step))[-MAX_POINTS:]
        series = []
        running = [t for t in times if job.running_at(t)]
        for pod in job.pods:
            if not pod.samples:
                continue
            override = job.values.get((metric_type, pod.name))
            if override is not None:
                count = min(len(override), len(running))
                slots = running[len(running) - count :]
                values = override[len(override) - count :]
                points = [{"time": t, "value": v} for t, v in zip(slots, values, strict=True)]
            else:
                points = [
                    {"time": t, "value": value_text(self._served(job, pod.name, metric_type, t))}
                    for t in running
                ]
            series.append({"podName": pod.name, "metrics": points})
        return series

    def _served(self, job: SimJob, pod: str, metric_type: str, at: float) -> float:
        value = metric_value(self.seed, job, pod, metric_type, at, in_step=self.in_step)
        if job.fault is not None:
            value = planted_value(job, pod, metric_type, value)
        if metric_type in USAGE_TYPES and self.usage_unit == "ratio":
            return value / 100.0
        return value

    def events(self, job: SimJob, now: float) -> list[dict[str, Any]]:
        """The job's events up to `now`, newest first, as the events API lists them."""
        if job.event_items is not None:
            return [dict(e) for e in job.event_items]
        if job.event_script is not None:
            script = sorted(job.event_script, key=lambda pair: pair[0], reverse=True)
            return [dict(e) for at, e in script if at <= now]
        found: list[dict[str, Any]] = []

        def add(
            reason: str, message: str, first: float, last: float, count: int, kind: str = "Normal"
        ) -> None:
            if first <= now:
                found.append(
                    {
                        "reason": reason,
                        "message": message,
                        "firstTimestamp": go_time(first),
                        "lastTimestamp": go_time(min(last, now)),
                        "count": count,
                        "type": kind,
                    }
                )

        created = job.created_at
        for pod in job.pods:
            add("SuccessfulCreatePod", f"Created pod: {pod.name}", created + 2, created + 2, 1)
        add(
            "SuccessfulCreateService",
            f"Created service: {job.pods[0].name}" if job.pods else "Created service",
            created + 2,
            created + 2,
            1,
        )
        running = job.running_since(now)
        if running is not None and running - created > 30:
            # A job that queued for GPUs: the scheduler's warning, repeated while it waited.
            add(
                "FailedScheduling",
                "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.",
                created + 5,
                running - 5,
                max(1, int((running - created) // 60)),
                "Warning",
            )
        if running is not None:
            add("JobRunning", f"PyTorchJob {job.name} is running.", running, running, 1)
        for pod in job.pods:
            restarts = restarts_at(job, pod, now)
            if restarts and running is not None:
                add(
                    "BackOff",
                    f"Back-off restarting failed container in pod {pod.name}",
                    running + 60,
                    now,
                    restarts,
                    "Warning",
                )
        status = job.status_at(now)
        ended = run_end(job, now) if job.status is None else now
        if status == "Failed":
            add(
                "Error",
                f"Error pod {job.pods[0].name if job.pods else ''} exitCode: 1",
                ended - 9,
                ended - 9,
                1,
                "Warning",
            )
            add("ExitedWithCode", "exited with code 1", ended - 9, ended, 2)
            add(
                "JobFailed",
                f"PyTorchJob {job.name} is failed because 1 Master replica(s) failed.",
                ended,
                ended,
                1,
            )
        elif status == "Succeeded":
            add("JobSucceeded", f"PyTorchJob {job.name} successfully completed.", ended, ended, 1)
        if status in TERMINAL_STATUSES:
            add("JobTerminated", "Job has been terminated. Deleting PodGroup", ended, ended, 4)
        found.sort(key=lambda e: str(e["lastTimestamp"]), reverse=True)
        return found


def _envs(job: SimJob) -> list[dict[str, str]]:
    return [
        {"name": "AIHC_JOB_NAME", "value": job.name},
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "WANDB_API_KEY", "value": f"{SECRET_MARK}-wandb-{job.job_id}"},
        {"name": "HF_TOKEN", "value": f"hf_{SECRET_MARK}"},
    ]
