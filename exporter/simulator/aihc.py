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
a throttled card, a hung job and an idle job (`PLANTED`, `planted_value`); a slow rank or a
throttled card hits a worker. A world with planted faults keeps every job's pods in step
(`AihcWorld.in_step`), as the ranks of a synchronous job are, so the planted ones are the only
outliers.

Job items and pods come in either spelling (`AihcWorld.spelling`): the documentation's
examples' (`jobId`, `queueId`, `jobSpec`, `podPhase`) or that of Baidu's generated SDK,
`baiducloud-python-sdk-aihc` 0.0.4 (`jobid`, `queue`, `Job`, `datasources`, `historyPods`,
`jobTimeLine`, pods with `status` and `creationAt` and no `podPhase`).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import itertools
import json
import math
import random
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from aiohttp import web

from exporter.providers.aihc.signer import Credentials, encode, sign
from exporter.providers.aihc.target import AIHC_METRIC_TYPES, USAGE_TYPES
from exporter.providers.kit.wire import UNWIRE, unwire
from exporter.simulator.core import json_response, path_segments, query_of

DEMO_ACCESS_KEY_ID = "AKDEMO0b7e4f1a9c2d"
DEMO_SECRET_ACCESS_KEY = "SKDEMO5c8a1f3e7b90d24"
DEMO_RESOURCE_POOL = "cce-demo0001"

# Part of every secret-bearing value the simulator serves.
SECRET_MARK = "SIMSECRET"

TERMINAL_STATUSES = frozenset({"Succeeded", "Failed", "Stopped"})
# How far a signature's timestamp may run ahead of the service's clock.
MAX_CLOCK_SKEW = 900.0
DEFAULT_TIME_STEP = 300
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


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_time(at: float) -> str:
    """Go's time.String() in UTC, as the events API prints it."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def _unit(*parts: object) -> float:
    """A deterministic pseudo-random number in [0, 1) for `parts`."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass
class SimPod:
    name: str
    replica_type: str = "worker"
    node: str = "192.168.0.1"
    ip: str = "10.0.0.1"
    # None: follows the job's status.
    phase: str | None = None
    restarts: int = 0
    # A flaky pod restarts every this many seconds while its job runs; 0: never.
    restart_every: float = 0.0
    # False: DescribeJobMetrics has no points for this pod.
    samples: bool = True
    # The pod's failure reason, as DescribeJob's pods carry it (`OOMKilled`).
    reason: str = ""


@dataclass
class SimJob:
    job_id: str
    name: str
    pool: str
    queue: str
    created_at: float
    # (since, status), in time order; the first entry's status holds from created_at.
    timeline: list[tuple[float, str]]
    pods: list[SimPod]
    job_type: str = "pytorch"
    priority: str = "normal"
    user_id: str = "eca97e148cb74e9683d7b7240829d1ff"
    image: str = "registry.baidubce.com/aihc-aiak/aiak-megatron:ubuntu20.04-cu11.8-torch1.14.0"
    # Fixed values that override the timeline (tests set these).
    status: str | None = None
    finished_at: str | None = None
    created_at_text: str | None = None
    # The job leaves DescribeJobs at this time; None: never.
    removed_at: float | None = None
    # (metricType, pod) -> the values of the newest points, oldest first, served verbatim.
    values: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    # Whether list and detail replies carry the job-wide usage figures (`job_stats`).
    stats: bool = True
    # Served instead of the computed figures (a test's odd values), when set.
    stats_override: dict[str, Any] | None = None
    # Served verbatim as the job's events, when set (a test's odd types and reasons).
    event_items: list[dict[str, Any]] | None = None
    # (when it happens, the event): served from then on, newest first (a lifecycle world's).
    event_script: list[tuple[float, dict[str, Any]]] | None = None
    # A planted fault (one of PLANTED), and the pod it hits (a slow rank, a throttled card).
    fault: str | None = None
    fault_pod: str = ""
    # GPUs per pod in `jobSpec.resources`; None: the spec names no GPU resource.
    gpus: int | None = 8

    def status_at(self, now: float) -> str:
        if self.status is not None:
            return self.status
        current = self.timeline[0][1]
        for since, status in self.timeline:
            if since <= now:
                current = status
        return current

    def finished_at_at(self, now: float) -> str:
        if self.finished_at is not None:
            return self.finished_at
        if self.status is not None:
            return ""
        for since, status in self.timeline:
            if since <= now and status in TERMINAL_STATUSES:
                return rfc3339(since)
        return ""

    def running_since(self, now: float) -> float | None:
        for since, status in self.timeline:
            if status == "Running" and since <= now:
                return since
        return self.created_at if self.status == "Running" else None

    def running_at(self, at: float) -> bool:
        if self.status is not None:
            return self.status == "Running"
        return self.status_at(at) == "Running"

    def visible_at(self, now: float) -> bool:
        return self.created_at <= now and (self.removed_at is None or now < self.removed_at)


def _pod_phase(job: SimJob, pod: SimPod, index: int, now: float) -> str:
    if pod.phase is not None:
        return pod.phase
    status = job.status_at(now)
    if status in ("Created", "Pending", "Scheduled"):
        return "Pending"
    if status == "Starting":
        return "Starting"
    if status == "Succeeded":
        # The service spells it both ways; so does the simulator.
        return "Succeed" if _unit(job.job_id, "sic") < 0.3 else "Succeeded"
    if status == "Failed":
        return "Failed" if index == 0 else "Unknown"
    return "Running"


def _restarts(job: SimJob, pod: SimPod, now: float) -> int:
    since = job.running_since(now)
    if not pod.restart_every or since is None:
        return pod.restarts
    return pod.restarts + max(0, int((min(now, _run_end(job, now)) - since) // pod.restart_every))


def _run_end(job: SimJob, now: float) -> float:
    for since, status in job.timeline:
        if status in TERMINAL_STATUSES and since <= now:
            return since
    return now


# metricType -> (low, high) in the service's units (usage types in percent).
_RANGES: dict[str, tuple[float, float]] = {
    "GpuUsage": (62.0, 99.5),
    "GpuMemoryUsage": (55.0, 93.0),
    "CpuUsage": (6.0, 45.0),
    "MemoryUsage": (18.0, 66.0),
    "GpuPipeTensorUsage": (22.0, 71.0),
    "CpuTime": (3.0, 46.0),
    "MemoryAllocation": (4.0e10, 6.2e11),
    "DiskReadRate": (4.0e6, 8.0e8),
    "DiskWriteRate": (1.0e6, 3.2e8),
    "RDMASendDataRate": (1.5e9, 2.4e10),
    "RDMARecvDataRate": (1.5e9, 2.4e10),
    "PCIESendDataRate": (1.0e9, 2.6e10),
    "PCIERecvDataRate": (1.0e9, 2.6e10),
    "NVLinkSendDataRate": (4.0e10, 3.0e11),
    "NVLinkRecvDataRate": (4.0e10, 3.0e11),
    "GpuTemperature": (46.0, 83.0),
    "GpuPowerUsage": (240.0, 695.0),
    "RDMAHealth": (0.0, 1.0),
    "RDMASendErrorRate": (0.0, 4.0),
    "RDMARecvErrorRate": (0.0, 4.0),
    "RDMASendPacketsRate": (1.5e5, 3.2e6),
    "RDMARecvPacketsRate": (1.5e5, 3.2e6),
}


# The series of the jobs alive now: a cache of every series ever served grew for days.
@functools.lru_cache(maxsize=1 << 12)
def _series_shape(seed: int, job_id: str, pod: str, metric_type: str) -> tuple[float, float]:
    """A series' level and wave period: fixed for its life, so worked out once, not per point."""
    level = _unit(seed, job_id, pod, metric_type)
    period = 600.0 + 1800.0 * _unit(seed, job_id, "period")
    return level, period


def metric_value(
    seed: int, job: SimJob, pod: str, metric_type: str, at: float, *, in_step: bool = False
) -> float:
    """A plausible value: a per-pod level, a slow wave over the job's life, a little noise.
    `in_step`: the job's pods share the level and the wave, each within 1 % of the range of
    it (the ranks of a synchronous job)."""
    low, high = _RANGES[metric_type]
    noise = _unit(seed, job.job_id, pod, metric_type, int(at))
    if metric_type == "RDMAHealth":
        return 0.0 if noise < 0.01 else 1.0
    if metric_type in ("RDMASendErrorRate", "RDMARecvErrorRate"):
        return 0.0 if noise < 0.85 else round(high * (noise - 0.85) / 0.15, 2)
    level, period = _series_shape(seed, job.job_id, "" if in_step else pod, metric_type)
    wave = math.sin(2 * math.pi * at / period + 6.28 * level)
    spread = 0.02 if in_step else 0.1
    share = 0.45 + 0.3 * level + 0.15 * wave + spread * (noise - 0.5)
    return low + (high - low) * min(1.0, max(0.0, share))


# Faults `AihcWorld.plant` can plant, and what each does to its pods' values.
PLANTED = ("slow-rank", "throttled-card", "hung", "idle")
_PACE_TYPES = frozenset(
    {"GpuUsage", "GpuPipeTensorUsage", "RDMASendDataRate", "RDMARecvDataRate"}
    | {"NVLinkSendDataRate", "NVLinkRecvDataRate"}
)
_TRAFFIC_TYPES = frozenset(
    {"RDMASendDataRate", "RDMARecvDataRate", "NVLinkSendDataRate", "NVLinkRecvDataRate"}
    | {"PCIESendDataRate", "PCIERecvDataRate", "RDMASendPacketsRate", "RDMARecvPacketsRate"}
)


def planted_value(job: SimJob, pod: str, metric_type: str, value: float) -> float:
    """`value` as `job.fault` changes it (service units: usage types in percent).

    slow-rank: `fault_pod` computes and communicates at about half its peers' pace (GPU and
    tensor utilisation x 0.55, RDMA and NVLink x 0.5). throttled-card: `fault_pod` runs 16 C
    hotter and draws 40 % less power at the same utilisation. hung: every pod's GPUs, tensor
    pipes and traffic are flat near zero, at idle power. idle: every pod's GPUs are 2-6 %
    busy while the job still moves data (traffic at 5 %)."""
    fault = job.fault
    if fault in ("slow-rank", "throttled-card") and pod != job.fault_pod:
        return value
    if fault == "slow-rank" and metric_type in _PACE_TYPES:
        return value * (0.55 if metric_type.startswith("Gpu") else 0.5)
    if fault == "throttled-card" and metric_type == "GpuTemperature":
        return value + 16.0
    if fault == "throttled-card" and metric_type == "GpuPowerUsage":
        return value * 0.6
    hung = fault == "hung"
    if fault in ("hung", "idle") and metric_type in ("GpuUsage", "GpuPipeTensorUsage"):
        return value / 400.0 if hung else 2.0 + value / 25.0
    if fault in ("hung", "idle") and metric_type in _TRAFFIC_TYPES:
        return value / 1e5 if hung else value * 0.05
    if fault in ("hung", "idle") and metric_type == "GpuPowerUsage":
        return 70.0 + value / 20.0
    return value


def _value_text(value: float) -> str:
    return repr(round(value, 6))


@dataclass(frozen=True)
class _Pace:
    """How a lively pool's jobs come and go, in seconds."""

    every: float = 600.0
    jitter: float = 90.0
    run_min: float = 1650.0
    run_max: float = 2100.0
    keep_after: float = 5400.0

    @property
    def longest_life(self) -> float:
        return self.jitter + 200.0 + self.run_max + self.keep_after


_NAMES = (
    "llama3-8b-sft",
    "qwen2-72b-pretrain",
    "deepseek-moe-16b",
    "bert-large-finetune",
    "ernie-4-dpo",
    "mixtral-8x7b-lora",
    "视觉大模型-预训练",
    "resnet152-imagenet",
    "glm4-9b-rlhf",
    "whisper-large-v3",
)
_IMAGES = (
    "registry.baidubce.com/aihc-aiak/aiak-megatron:ubuntu20.04-cu11.8-torch1.14.0-py38",
    "registry.baidubce.com/aihc-aiak/aiak-training-llm:ubuntu22.04-cu12.3-torch2.2.0-py310",
    "registry.baidubce.com/inf-qa/pytorch:2.3.0-cuda12.1-cudnn8",
)
_USERS = ("eca97e148cb74e9683d7b7240829d1ff", "819eb20a0402403282ae8f84cde4024d")
# An epoch for job numbering, so job k of a pool is the same in every process.
_ANCHOR = 1_700_000_000.0


def _lively_job(seed: int, pool: str, queues: Sequence[str], k: int, pace: _Pace) -> SimJob:
    rng = random.Random(f"{seed}:{pool}:{k}")
    created = _ANCHOR + k * pace.every + rng.uniform(-pace.jitter, pace.jitter)
    job_id = "job-" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=12))
    name = f"{rng.choice(_NAMES)}-{k % 1000:03d}"
    pending = rng.uniform(20, 90)
    starting = pending + rng.uniform(10, 40)
    ended = starting + rng.uniform(pace.run_min, pace.run_max)
    outcome = rng.choices(["Succeeded", "Failed", "Stopped"], weights=[65, 25, 10])[0]
    if outcome == "Failed":
        ended = starting + rng.uniform(0.7, 1.0) * (ended - starting)
    timeline = [
        (created, "Created"),
        (created + 5, "Pending"),
        (created + pending, "Starting"),
        (created + starting, "Running"),
        (created + ended, outcome),
    ]
    workers = rng.choice([0, 1, 1, 2, 3])
    subnet = rng.randrange(1, 250)
    pods = [
        SimPod(
            f"{job_id}-{'master' if i == 0 else 'worker'}-{0 if i == 0 else i - 1}",
            replica_type="master" if i == 0 else "worker",
            node=f"192.168.{subnet}.{rng.randrange(2, 250)}",
            ip=f"10.{subnet}.{rng.randrange(0, 255)}.{rng.randrange(2, 250)}",
            restart_every=rng.choice([0.0, 0.0, 0.0, 420.0]),
        )
        for i in range(workers + 1)
    ]
    return SimJob(
        job_id=job_id,
        name=name,
        pool=pool,
        queue=queues[k % len(queues)],
        created_at=created,
        timeline=timeline,
        pods=pods,
        priority=rng.choice(["normal", "normal", "high", "low"]),
        user_id=rng.choice(_USERS),
        image=rng.choice(_IMAGES),
        removed_at=created + ended + pace.keep_after,
        # Some pools' replies carry the job-wide figures, some jobs' do not.
        stats=rng.random() < 0.7,
    )


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
        self._pace = _Pace()
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
            pace = _Pace(every=1800.0, jitter=300.0)
        first = math.floor((now - pace.longest_life - _ANCHOR) / pace.every) - 1
        last = math.floor((now + pace.jitter - _ANCHOR) / pace.every) + 1
        for k in range(first, last + 1):
            key = (pool, k)
            job = self._lively_cache.get(key)
            if job is None:
                job = _lively_job(self.seed, pool, self.pools[pool], k, pace)
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
        ran = 0.0 if since is None else max(0.0, _run_end(job, now) - since)
        return {
            "gpuUtilizationPercent": self.job_gpu_percent(job, "gpu") if running else 0.0,
            "gpuMemoryUtilizationPercent": self.job_gpu_percent(job, "memory") if running else 0.0,
            "runTimeNanoseconds": int(ran * 1e9),
        }

    def job_gpu_percent(self, job: SimJob, what: Literal["gpu", "memory"]) -> float:
        low, high = (55.0, 97.0) if what == "gpu" else (40.0, 90.0)
        return round(low + (high - low) * _unit(self.seed, job.job_id, f"job-{what}"), 2)

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
            item["jobTimeLine"] = _time_line(job, now)
        return item

    def pod_item(self, job: SimJob, pod: SimPod, index: int, now: float) -> dict[str, Any]:
        phase = _pod_phase(job, pod, index, now)
        item: dict[str, Any] = {
            "PodIP": pod.ip,
            "nodeName": pod.node,
            "creationTimestamp": rfc3339(job.created_at + 3),
            "uid": f"{_unit(job.job_id, pod.name):.16f}"[2:],
            "name": pod.name,
            "podPhase": phase,
            "status": phase,
            "replicaType": pod.replica_type,
            "restartCount": _restarts(job, pod, now),
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
                    {"time": t, "value": _value_text(self._served(job, pod.name, metric_type, t))}
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
            restarts = _restarts(job, pod, now)
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
        ended = _run_end(job, now) if job.status is None else now
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


def _time_line(job: SimJob, now: float) -> list[dict[str, str]]:
    """The SDK's `jobTimeLine`: the job's statuses so far, oldest first."""
    return [
        {"time": rfc3339(since), "conditionType": status, "conditionMessage": ""}
        for since, status in job.timeline
        if since <= now
    ]


def _envs(job: SimJob) -> list[dict[str, str]]:
    return [
        {"name": "AIHC_JOB_NAME", "value": job.name},
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "WANDB_API_KEY", "value": f"{SECRET_MARK}-wandb-{job.job_id}"},
        {"name": "HF_TOKEN", "value": f"hf_{SECRET_MARK}"},
    ]


# -- HTTP ------------------------------------------------------------------------------------


def _request_id() -> str:
    return "sim-" + "".join(random.choices("0123456789abcdef", k=16))


def bce_error(status: int, code: str, message: str) -> web.Response:
    return json_response(
        {"requestId": _request_id(), "code": code, "message": message}, status=status
    )


def canonical_uri(raw_path: str) -> str:
    """The path as the signer canonicalises it: each segment decoded, then encoded again."""
    return "/".join(
        encode(urllib.parse.unquote(segment, errors=UNWIRE)) for segment in raw_path.split("/")
    )


def check_signature(
    request: web.Request, credentials: Mapping[str, str], now: float
) -> web.Response | None:
    """None when the request is signed right; otherwise BCE's error reply."""
    auth = request.headers.get("Authorization", "")
    if not auth:
        return bce_error(403, "AccessDenied", "Authorization header is missing")
    parts = auth.split("/")
    if len(parts) != 6 or parts[0] != "bce-auth-v1":
        return bce_error(400, "InvalidHTTPAuthHeader", "Authorization header is malformed")
    _, access_key_id, when, expiration_text, signed, _signature = parts
    secret = credentials.get(access_key_id)
    if secret is None:
        return bce_error(403, "InvalidAccessKeyId", "the access key id does not exist")
    try:
        timestamp = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        expiration = int(expiration_text)
    except ValueError:
        return bce_error(400, "InvalidHTTPAuthHeader", "Authorization header is malformed")
    if now > timestamp + expiration or timestamp > now + MAX_CLOCK_SKEW:
        return bce_error(400, "RequestExpired", f"Request has expired. Timestamp date is {when}")
    expected = sign(
        Credentials(access_key_id, secret),
        request.method,
        canonical_uri(request.rel_url.raw_path),
        [(k, v) for k, v in request.headers.items() if k.lower() != "authorization"],
        query_of(request),
        timestamp,
        expiration,
        signed.split(";") if signed else None,
    )
    if not hmac.compare_digest(expected.encode(), auth.encode()):
        return bce_error(403, "AccessDenied", "signature does not match")
    return None


class ServiceError(Exception):
    """A BCE error reply: `before_action` hooks raise it to fail a call as the service would."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _body(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(unwire(raw) if raw else "{}")
    except ValueError:
        raise ServiceError("MalformedJSON", "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ServiceError("MalformedJSON", "the request body must be a JSON object")
    return data


def _int_field(body: Mapping[str, Any], key: str, default: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServiceError("MalformedJSON", f"{key} must be a number")
    return value


def _string_number(body: Mapping[str, Any], key: str) -> int | None:
    """startTime / endTime / timeStep: JSON strings holding integers (numbers are refused)."""
    if key not in body:
        return None
    value = body[key]
    if not isinstance(value, str):
        raise ServiceError("MalformedJSON", f"json: cannot unmarshal number into field {key}")
    try:
        return int(value)
    except ValueError:
        raise ServiceError("InvalidParameter", f"{key} must be unix seconds") from None


class _Service:
    def __init__(self, world: AihcWorld) -> None:
        self.world = world

    async def v2(self, request: web.Request) -> web.Response:
        refused = check_signature(request, self.world.credentials, time.time())
        if refused is not None:
            return refused
        action = request.query.get("action", "")
        handler = {
            "DescribeJobs": self.describe_jobs,
            "DescribeJob": self.describe_job,
            "DescribeJobMetrics": self.describe_job_metrics,
            "DescribeJobEvents": self.describe_job_events_v2,
        }.get(action)
        if handler is None:
            return bce_error(400, "InvalidAction", "unknown action")
        try:
            pool = request.query.get("resourcePoolId", "")
            if not pool:
                raise ServiceError("MissingParameter", "resourcePoolId is required")
            if pool not in self.world.pools:
                raise ServiceError("ResourcePoolNotFound", "no such resource pool", 404)
            body = _body(await request.read())
            if self.world.before_action is not None:
                self.world.before_action(action, body)
            return handler(request, pool, body)
        except ServiceError as exc:
            return bce_error(exc.status, exc.code, exc.message)

    def describe_jobs(self, request: web.Request, pool: str, body: dict[str, Any]) -> web.Response:
        world = self.world
        page = _int_field(body, "pageNumber", 1)
        size = _int_field(body, "pageSize", 10)
        if page < 1 or not 1 <= size <= 1000:
            raise ServiceError("InvalidParameter", "pageNumber or pageSize out of range")
        queue = body.get("queue") or query_of(request).get("queueID") or None
        if world.before_page is not None:
            world.before_page(pool, queue, page)
        now = world.now()
        jobs = world.jobs_in(pool, now)
        if queue is not None:
            jobs = [j for j in jobs if j.queue == queue]
        if body.get("status"):
            jobs = [j for j in jobs if j.status_at(now) == body["status"]]
        keyword = body.get("keyword")
        if keyword:
            field_name = "queue" if body.get("keywordType") == "queueName" else "name"
            jobs = [j for j in jobs if str(keyword) in getattr(j, field_name)]
        if body.get("orderBy") == "finishedAt":
            jobs.sort(key=lambda j: (j.finished_at_at(now), j.created_at, j.job_id))
        else:
            jobs.sort(key=lambda j: (j.created_at, j.job_id))
        if body.get("order", "desc") != "asc":
            jobs.reverse()
        chunk = jobs[(page - 1) * size : page * size]
        return json_response(
            {
                "requestId": _request_id(),
                "totalCount": len(jobs),
                "jobs": [world.job_item(j, now) for j in chunk],
            }
        )

    def _job(self, pool: str, body: Mapping[str, Any]) -> SimJob:
        job_id = body.get("jobId")
        if not isinstance(job_id, str) or not job_id:
            raise ServiceError("MissingParameter", "jobId is required")
        job = self.world.job(job_id)
        if job is None or job.pool != pool:
            raise ServiceError("JobNotFound", "no such job", 404)
        return job

    def describe_job(self, request: web.Request, pool: str, body: dict[str, Any]) -> web.Response:
        job = self._job(pool, body)
        now = self.world.now()
        item = self.world.job_item(job, now)
        if body.get("needDetail") is True:
            item["pods"] = self.world.pods_at(job, now)
            # The SDK's DescribeJob carries the status timeline, whichever spelling.
            item.setdefault("jobTimeLine", _time_line(job, now))
        request_id = _request_id()
        if self.world.next_shape() == "nested":
            return json_response({"requestId": request_id, "job": item})
        return json_response({"requestId": request_id, **item})

    def describe_job_metrics(
        self, request: web.Request, pool: str, body: dict[str, Any]
    ) -> web.Response:
        if not request.query.get("queueID"):
            raise ServiceError("MissingParameter", "queueID is required")
        job = self._job(pool, body)
        metric_type = body.get("metricType")
        if metric_type not in AIHC_METRIC_TYPES:
            raise ServiceError("InvalidParameter", "unknown metricType")
        start = _string_number(body, "startTime")
        end = _string_number(body, "endTime")
        step = _string_number(body, "timeStep")
        _string_number(body, "rateInterval")
        if not self.world.lively:
            self.world.metric_requests.append(dict(body))
        now = int(self.world.now())
        end = now if end is None else end
        start = int(job.created_at) if start is None else start
        step = DEFAULT_TIME_STEP if step is None else step
        if step <= 0 or start > end:
            raise ServiceError("InvalidParameter", "bad time range")
        return json_response(
            {
                "requestId": _request_id(),
                "jobId": job.job_id,
                "metrics": self.world.metric_series(job, str(metric_type), start, end, step),
            }
        )

    def _events_reply(self, job: SimJob, start: float | None, end: float | None) -> web.Response:
        now = self.world.now()
        events = self.world.events(job, now)
        if start is not None or end is not None:
            low, high = start or 0.0, end or now
            events = [
                e
                for e in events
                if low
                <= datetime.strptime(str(e["lastTimestamp"]), "%Y-%m-%d %H:%M:%S +0000 UTC")
                .replace(tzinfo=UTC)
                .timestamp()
                <= high
            ]
        return json_response({"events": events, "total": len(events)})

    def describe_job_events_v2(
        self, request: web.Request, pool: str, body: dict[str, Any]
    ) -> web.Response:
        job = self._job(pool, body)
        return self._events_reply(
            job, _string_number(body, "startTime"), _string_number(body, "endTime")
        )

    async def job_events(self, request: web.Request) -> web.Response:
        refused = check_signature(request, self.world.credentials, time.time())
        if refused is not None:
            return refused
        pool = request.query.get("resourcePoolId", "")
        if pool not in self.world.pools:
            return bce_error(404 if pool else 400, "ResourcePoolNotFound", "no such resource pool")
        if request.query.get("jobFramework") != "PyTorchJob":
            return bce_error(400, "InvalidParameter", "jobFramework must be PyTorchJob")
        segments = path_segments(request)
        if len(segments) != 6 or segments[-1] != "events":
            return bce_error(404, "NotFound", "no such path")
        job = self.world.job(segments[4])
        if job is None or job.pool != pool:
            return bce_error(404, "JobNotFound", "no such job")
        try:
            if self.world.before_action is not None:
                self.world.before_action("events", {"jobId": job.job_id})
        except ServiceError as exc:
            return bce_error(exc.status, exc.code, exc.message)
        try:
            start = _query_time(request, "startTime")
            end = _query_time(request, "endTime")
        except ValueError:
            return bce_error(400, "InvalidParameter", "startTime/endTime must be unix seconds")
        return self._events_reply(job, start, end)


def _query_time(request: web.Request, key: str) -> float | None:
    value = request.query.get(key)
    return None if value is None else float(int(value))


def register_aihc(app: web.Application, world: AihcWorld) -> None:
    """Add the AIHC routes to `app`."""
    service = _Service(world)
    app.router.add_post("/", service.v2)
    # Any job id, `/` included (encoded): `job_events` reads it from the raw path.
    app.router.add_get("/api/v1/aijobs/{job_path:[\\s\\S]+}", service.job_events)
