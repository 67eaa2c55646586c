"""The fake AIHC's jobs and pods: their statuses over time, their pods' phases and restarts,
the values their metrics serve, the faults that can be planted in them, and the jobs of a
lively pool, each a pure function of (seed, pool, k).

`exporter.simulator.aihc` holds them in its world, and `exporter.simulator.aihc_replies` builds
the replies from them.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

TERMINAL_STATUSES = frozenset({"Succeeded", "Failed", "Stopped"})


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_time(at: float) -> str:
    """Go's time.String() in UTC, as the events API prints it."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def unit(*parts: object) -> float:
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

    @classmethod
    def nth(cls, job_id: str, index: int, **fields: Any) -> SimPod:
        """The `index`th pod of `job_id`, named as the service names them: a master first,
        then workers numbered from 0."""
        role = "master" if index == 0 else "worker"
        return cls(f"{job_id}-{role}-{max(0, index - 1)}", replica_type=role, **fields)


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


def pod_phase(job: SimJob, pod: SimPod, index: int, now: float) -> str:
    if pod.phase is not None:
        return pod.phase
    status = job.status_at(now)
    if status in ("Created", "Pending", "Scheduled"):
        return "Pending"
    if status == "Starting":
        return "Starting"
    if status == "Succeeded":
        # The service spells it both ways; so does the simulator.
        return "Succeed" if unit(job.job_id, "sic") < 0.3 else "Succeeded"
    if status == "Failed":
        return "Failed" if index == 0 else "Unknown"
    return "Running"


def restarts_at(job: SimJob, pod: SimPod, now: float) -> int:
    since = job.running_since(now)
    if not pod.restart_every or since is None:
        return pod.restarts
    return pod.restarts + max(0, int((min(now, run_end(job, now)) - since) // pod.restart_every))


def run_end(job: SimJob, now: float) -> float:
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
    level = unit(seed, job_id, pod, metric_type)
    period = 600.0 + 1800.0 * unit(seed, job_id, "period")
    return level, period


def metric_value(
    seed: int, job: SimJob, pod: str, metric_type: str, at: float, *, in_step: bool = False
) -> float:
    """A plausible value: a per-pod level, a slow wave over the job's life, a little noise.
    `in_step`: the job's pods share the level and the wave, each within 1 % of the range of
    it (the ranks of a synchronous job)."""
    low, high = _RANGES[metric_type]
    noise = unit(seed, job.job_id, pod, metric_type, int(at))
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


def value_text(value: float) -> str:
    return repr(round(value, 6))


@dataclass(frozen=True)
class Pace:
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
ANCHOR = 1_700_000_000.0


def lively_job(seed: int, pool: str, queues: Sequence[str], k: int, pace: Pace) -> SimJob:
    """Job k of a lively pool: created about `k` times `pace.every` after ANCHOR, it waits,
    starts, runs with 1-4 pods and succeeds, fails or is stopped, then leaves the list."""
    rng = random.Random(f"{seed}:{pool}:{k}")
    created = ANCHOR + k * pace.every + rng.uniform(-pace.jitter, pace.jitter)
    job_id = "job-" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789", k=12))
    name = f"{rng.choice(_NAMES)}-{k % 1000:03d}"
    timeline = _lively_timeline(rng, created, pace)
    return SimJob(
        job_id=job_id,
        name=name,
        pool=pool,
        queue=queues[k % len(queues)],
        created_at=created,
        timeline=timeline,
        pods=_lively_pods(rng, job_id),
        priority=rng.choice(["normal", "normal", "high", "low"]),
        user_id=rng.choice(_USERS),
        image=rng.choice(_IMAGES),
        # It leaves the list `pace.keep_after` after it ends.
        removed_at=timeline[-1][0] + pace.keep_after,
        # Some pools' replies carry the job-wide figures, some jobs' do not.
        stats=rng.random() < 0.7,
    )


def _lively_timeline(rng: random.Random, created: float, pace: Pace) -> list[tuple[float, str]]:
    """Created, Pending, Starting, Running, then its outcome: a failed job ends early."""
    pending = rng.uniform(20, 90)
    starting = pending + rng.uniform(10, 40)
    ended = starting + rng.uniform(pace.run_min, pace.run_max)
    outcome = rng.choices(["Succeeded", "Failed", "Stopped"], weights=[65, 25, 10])[0]
    if outcome == "Failed":
        ended = starting + rng.uniform(0.7, 1.0) * (ended - starting)
    return [
        (created, "Created"),
        (created + 5, "Pending"),
        (created + pending, "Starting"),
        (created + starting, "Running"),
        (created + ended, outcome),
    ]


def _lively_pods(rng: random.Random, job_id: str) -> list[SimPod]:
    """A master and 0-3 workers on one subnet, one pod in four restarting every 7 minutes."""
    workers = rng.choice([0, 1, 1, 2, 3])
    subnet = rng.randrange(1, 250)
    return [
        SimPod.nth(
            job_id,
            i,
            node=f"192.168.{subnet}.{rng.randrange(2, 250)}",
            ip=f"10.{subnet}.{rng.randrange(0, 255)}.{rng.randrange(2, 250)}",
            restart_every=rng.choice([0.0, 0.0, 0.0, 420.0]),
        )
        for i in range(workers + 1)
    ]


def time_line(job: SimJob, now: float) -> list[dict[str, str]]:
    """The SDK's `jobTimeLine`: the job's statuses so far, oldest first."""
    return [
        {"time": rfc3339(since), "conditionType": status, "conditionMessage": ""}
        for since, status in job.timeline
        if since <= now
    ]
