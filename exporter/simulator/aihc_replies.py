"""The fake AIHC's reply bodies, built from an `AihcWorld` (`exporter.simulator.aihc`): job
items with their job-wide figures and secret-bearing fields, pods, metric series and events,
each in the world's spelling and units. `exporter.simulator.aihc_api` serves them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from exporter.providers.aihc.target import USAGE_TYPES
from exporter.simulator.aihc import SECRET_MARK, AihcWorld
from exporter.simulator.aihc_jobs import (
    TERMINAL_STATUSES,
    SimJob,
    SimPod,
    go_time,
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

MAX_POINTS = 1000

# The job item's keys the SDK spells otherwise; the others are the same in both.
_SDK_JOB_KEYS = {
    "jobId": "jobid",
    "queueId": "queue",
    "jobSpec": "Job",
    "dataSources": "datasources",
    "enableFaultTolerant": "enableFaultTolerance",
    "faultTolerantArgs": "faultToleranceArgs",
}


def job_stats(world: AihcWorld, job: SimJob, now: float) -> dict[str, Any]:
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
        "gpuUtilizationPercent": job_gpu_percent(world, job, "gpu") if running else 0.0,
        "gpuMemoryUtilizationPercent": job_gpu_percent(world, job, "memory") if running else 0.0,
        "runTimeNanoseconds": int(ran * 1e9),
    }


def job_gpu_percent(world: AihcWorld, job: SimJob, what: Literal["gpu", "memory"]) -> float:
    """The job's GPU (or GPU memory) utilisation while it runs, a level of its own."""
    low, high = (55.0, 97.0) if what == "gpu" else (40.0, 90.0)
    return round(low + (high - low) * unit(world.seed, job.job_id, f"job-{what}"), 2)


def job_item(world: AihcWorld, job: SimJob, now: float) -> dict[str, Any]:
    """A JobItem as DescribeJobs lists it, secret-bearing fields included."""
    item: dict[str, Any] = {
        **job_stats(world, job, now),
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
        "jobSpec": _job_spec(job),
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
    if world.spelling == "sdk":
        item = {_SDK_JOB_KEYS.get(k, k): v for k, v in item.items()}
        item["historyPods"] = []
        item["jobTimeLine"] = time_line(job, now)
    return item


def _job_spec(job: SimJob) -> dict[str, Any]:
    """The item's `jobSpec`: image (and the registry's secret login), replicas, GPUs, envs."""
    return {
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
    }


def _envs(job: SimJob) -> list[dict[str, str]]:
    """The envs its spec and pods carry, two of them secrets."""
    return [
        {"name": "AIHC_JOB_NAME", "value": job.name},
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "WANDB_API_KEY", "value": f"{SECRET_MARK}-wandb-{job.job_id}"},
        {"name": "HF_TOKEN", "value": f"hf_{SECRET_MARK}"},
    ]


def pod_item(world: AihcWorld, job: SimJob, pod: SimPod, index: int, now: float) -> dict[str, Any]:
    """A pod as DescribeJob's detail lists it."""
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
    if world.spelling == "sdk":
        del item["podPhase"]
        item["creationAt"] = item.pop("creationTimestamp")
    return item


def pods_at(world: AihcWorld, job: SimJob, now: float) -> list[dict[str, Any]]:
    """The job's pods at `now`: none once a job of a timeline is Stopped."""
    if job.status is None and job.status_at(now) == "Stopped":
        return []
    return [pod_item(world, job, pod, i, now) for i, pod in enumerate(job.pods)]


def metric_series(
    world: AihcWorld, job: SimJob, metric_type: str, start: int, end: int, step: int
) -> list[dict[str, Any]]:
    """DescribeJobMetrics' series: per pod with samples, a point a step while the job runs
    (the newest MAX_POINTS), each pod's `SimJob.values` served verbatim where set."""
    end = min(end, int(world.now()))
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
                {"time": t, "value": value_text(_served(world, job, pod.name, metric_type, t))}
                for t in running
            ]
        series.append({"podName": pod.name, "metrics": points})
    return series


def _served(world: AihcWorld, job: SimJob, pod: str, metric_type: str, at: float) -> float:
    value = metric_value(world.seed, job, pod, metric_type, at, in_step=world.in_step)
    if job.fault is not None:
        value = planted_value(job, pod, metric_type, value)
    if metric_type in USAGE_TYPES and world.usage_unit == "ratio":
        return value / 100.0
    return value


@dataclass(frozen=True, slots=True)
class _Event:
    """An event of a job as it happens from `first` to `last`, `count` times."""

    reason: str
    message: str
    first: float
    last: float
    count: int
    kind: str = "Normal"

    def item(self, now: float) -> dict[str, Any]:
        """The event as the events API lists it at `now`: seen last at `now` at the latest."""
        return {
            "reason": self.reason,
            "message": self.message,
            "firstTimestamp": go_time(self.first),
            "lastTimestamp": go_time(min(self.last, now)),
            "count": self.count,
            "type": self.kind,
        }


def events(job: SimJob, now: float) -> list[dict[str, Any]]:
    """The job's events up to `now`, newest first, as the events API lists them."""
    if job.event_items is not None:
        return [dict(e) for e in job.event_items]
    if job.event_script is not None:
        script = sorted(job.event_script, key=lambda pair: pair[0], reverse=True)
        return [dict(e) for at, e in script if at <= now]
    running = job.running_since(now)
    happened = [
        *_created_events(job),
        *_waiting_events(job, running),
        *_running_events(job, running, now),
        *_end_events(job, now),
    ]
    found = [e.item(now) for e in happened if e.first <= now]
    found.sort(key=lambda e: str(e["lastTimestamp"]), reverse=True)
    return found


def _created_events(job: SimJob) -> list[_Event]:
    """Its pods and service, created two seconds after the job."""
    at = job.created_at + 2
    service = f"Created service: {job.pods[0].name}" if job.pods else "Created service"
    return [
        *(_Event("SuccessfulCreatePod", f"Created pod: {pod.name}", at, at, 1) for pod in job.pods),
        _Event("SuccessfulCreateService", service, at, at, 1),
    ]


def _waiting_events(job: SimJob, running: float | None) -> list[_Event]:
    """A job that queued for GPUs: the scheduler's warning, repeated while it waited."""
    created = job.created_at
    if running is None or running - created <= 30:
        return []
    return [
        _Event(
            "FailedScheduling",
            "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.",
            created + 5,
            running - 5,
            max(1, int((running - created) // 60)),
            "Warning",
        )
    ]


def _running_events(job: SimJob, running: float | None, now: float) -> list[_Event]:
    """The job's start, and each of its restarting pods' back-off, repeated since."""
    if running is None:
        return []
    found = [_Event("JobRunning", f"PyTorchJob {job.name} is running.", running, running, 1)]
    for pod in job.pods:
        restarts = restarts_at(job, pod, now)
        if restarts:
            found.append(
                _Event(
                    "BackOff",
                    f"Back-off restarting failed container in pod {pod.name}",
                    running + 60,
                    now,
                    restarts,
                    "Warning",
                )
            )
    return found


def _end_events(job: SimJob, now: float) -> list[_Event]:
    """How a finished job ended: failed (its master's error and exit) or succeeded, then
    terminated."""
    status = job.status_at(now)
    ended = run_end(job, now) if job.status is None else now
    found = []
    if status == "Failed":
        master = job.pods[0].name if job.pods else ""
        failed = f"PyTorchJob {job.name} is failed because 1 Master replica(s) failed."
        found += [
            _Event("Error", f"Error pod {master} exitCode: 1", ended - 9, ended - 9, 1, "Warning"),
            _Event("ExitedWithCode", "exited with code 1", ended - 9, ended, 2),
            _Event("JobFailed", failed, ended, ended, 1),
        ]
    elif status == "Succeeded":
        succeeded = f"PyTorchJob {job.name} successfully completed."
        found.append(_Event("JobSucceeded", succeeded, ended, ended, 1))
    if status in TERMINAL_STATUSES:
        terminated = "Job has been terminated. Deleting PodGroup"
        found.append(_Event("JobTerminated", terminated, ended, ended, 4))
    return found
