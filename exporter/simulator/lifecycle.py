"""Lifecycle worlds for the simulated AIHC: queues that wait as real ones do, jobs that fail
for each reason a training platform sees, with the events each produces, and restarts.

`populate` adds, to one pool of an `AihcWorld`, a seeded stream of jobs from `hours` before
`now` to `hours` after it: each waits in its queue (a log-normal wait, clipped to the queue's
range: `QUEUE_WAITS`), runs on 1-8 GPUs a pod (or a spec that names no GPU), and succeeds,
exits non-zero, restarts once, or is still running or waiting. Its failures are all the
user's own (`user_exit`), at most one an hour per queue, and its waits stay within their
queue's range, so none of them is a case for the lifecycle alerts.

`plant` adds the cases those alerts and the failure classifier are for, and returns them:
one job failing of each class of `exporter.providers.kit.failures.CLASSES` (two more of
`hardware` in the same queue: a burst), a job waiting far longer than its queue does, and a
job in a restart loop. Planted failures fail `PLANTED_FAIL_AFTER` after `now`, so an exporter
started with the simulator sees them wait or run first.

Events are spelled as the AIHC events page's example spells them (`ExitedWithCode`
"Pod: default.<pod> exited with code 1", `Error` "Error pod <pod> container pytorch exitCode:
1 terminated message: ", `JobFailed`, `FailedToStartFaultTolerance` "... check all nodes are
healthy。"), and, where the page has no example, as Kubernetes spells its events
(`FailedScheduling`, `Failed` "Failed to pull image", `Preempted`, `OOMKilled` as the pod's
reason). A collective failure's event is a guess: AIHC says its fault tolerance records NCCL
errors found in the logs as job events, without an example (`FaultDetected`).

Every duration is multiplied by `scale`, so a test can run an hour of the world in 30 s.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_jobs import SimJob, go_time, rfc3339

# queue -> (shortest, longest) wait in its queue, seconds; the median is their geometric mean.
QUEUE_WAITS: Final = {
    "default": (45.0, 240.0),
    "research": (180.0, 900.0),
    "llm-pretrain": (600.0, 2700.0),
}
# One job a queue this often, in the stream `populate` adds.
EVERY: Final = 900.0
# How long after `now` planted failures fail.
PLANTED_FAIL_AFTER: Final = 4.0
# The queue of the planted failures and of the job waiting too long.
PLANTED_QUEUE: Final = "default"
# A planted restart loop restarts this often (world seconds).
LOOP_EVERY: Final = 360.0
GPU_CHOICES: Final = (1, 2, 4, 8, 8, 8, None)
FAILURE_CLASSES: Final = (
    "hardware",
    "preempted",
    "oom",
    "collective",
    "user_exit",
    "image_pull",
    "scheduling",
    "unknown",
)
# Classes of failures that happen before a job runs.
BEFORE_RUNNING: Final = frozenset({"image_pull", "scheduling"})


# (when it happens, the event): a job's `SimJob.event_script`, or part of it.
Script = list[tuple[float, dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Planted:
    """A planted case: `case` is a failure class, `pending` or `restart-loop`."""

    case: str
    job_id: str
    queue: str


def _event(at: float, reason: str, message: str, kind: str = "Normal", count: int = 1) -> Any:
    return (
        at,
        {
            "reason": reason,
            "message": message,
            "firstTimestamp": go_time(at),
            "lastTimestamp": go_time(at),
            "count": count,
            "type": kind,
        },
    )


def _exit(at: float, pod: str, code: int) -> Script:
    return [
        _event(
            at - 9,
            "Error",
            f"Error pod {pod} container pytorch exitCode: {code} terminated message: ",
            "Warning",
        ),
        _event(at - 9, "ExitedWithCode", f"Pod: default.{pod} exited with code {code}", count=2),
    ]


def failure_events(failure_class: str, job: SimJob, at: float) -> tuple[Script, str]:
    """The events a job failing of `failure_class` at `at` leaves, and its first pod's
    reason, spelled as module docstring says."""
    events, reason = _FAILURES[failure_class](job, job.pods[0].name, at)
    failed = f"PyTorchJob {job.name} is failed because 1 Master replica(s) failed."
    return [*events, _event(at, "JobFailed", failed)], reason


def _hardware(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """The pod exits, and fault tolerance finds a node unhealthy."""
    message = (
        f"Pytorchjob: {job.name}， failed to "
        "start fault tolerance。Reason：check all nodes are healthy。"
    )
    events = [*_exit(at, pod, 1), _event(at, "FailedToStartFaultTolerance", message, "Warning")]
    return events, "Error"


def _preempted(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """A higher priority job preempts the pod, which is killed."""
    message = f"Pod default/{pod} was preempted by a higher priority job"
    return [_event(at - 20, "Preempted", message, "Warning"), *_exit(at, pod, 137)], "Error"


def _oom(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """The pod is killed, OOMKilled its reason."""
    return _exit(at, pod, 137), "OOMKilled"


def _collective(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """An NCCL watchdog's timeout in the pod's log, then the pod exits."""
    message = (
        f"Pod {pod} log: [Rank 3] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=5021, OpType=ALLREDUCE) "
        "ran for 1800000 milliseconds before timing out."
    )
    return [_event(at - 30, "FaultDetected", message, "Warning"), *_exit(at, pod, 1)], "Error"


def _user_exit(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """The training script exits 1."""
    return _exit(at, pod, 1), "Error"


def _image_pull(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """The image's tag does not exist: pulls fail, then back off."""
    image = "registry.baidubce.com/aihc-aiak/aiak-megatron:no-such-tag"
    failed = f'Failed to pull image "{image}": rpc error: code = NotFound desc = manifest unknown'
    return [
        _event(at - 60, "Failed", failed, "Warning", 4),
        _event(at - 30, "BackOff", f'Back-off pulling image "{image}"', "Warning", 6),
    ], "ImagePullBackOff"


def _scheduling(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """No node has the GPUs the job asks for, again and again."""
    message = "0/16 nodes are available: 16 Insufficient nvidia.com/gpu."
    return [_event(at - 60, "FailedScheduling", message, "Warning", 30)], ""


def _unknown(job: SimJob, pod: str, at: float) -> tuple[Script, str]:
    """An event no failure class knows."""
    message = "Allocate failed due to rpc error"
    return [_event(at - 5, "UnexpectedAdmissionError", message, "Warning")], ""


# Failure class -> what a job failing of it leaves (`failure_events`).
_FAILURES: Final[dict[str, Callable[[SimJob, str, float], tuple[Script, str]]]] = {
    "hardware": _hardware,
    "preempted": _preempted,
    "oom": _oom,
    "collective": _collective,
    "user_exit": _user_exit,
    "image_pull": _image_pull,
    "scheduling": _scheduling,
    "unknown": _unknown,
}


def _created_events(job: SimJob) -> Script:
    at = job.created_at + 2
    return [
        *(_event(at, "SuccessfulCreatePod", f"Created pod: {p.name}") for p in job.pods),
        _event(at, "SuccessfulCreateService", f"Created service: {job.pods[0].name}"),
    ]


def _wait(rng: random.Random, queue: str) -> float:
    low, high = QUEUE_WAITS[queue]
    median = math.sqrt(low * high)
    return min(high, max(low, rng.lognormvariate(math.log(median), 0.5)))


def _job(
    world: AihcWorld, rng: random.Random, pool: str, queue: str, created: float, name: str
) -> SimJob:
    pods = rng.choice((1, 2, 2, 4))
    job = world.add_job(pool=pool, queue=queue, pods=pods, name=name, created_at=created)
    job.status = None
    job.gpus = rng.choice(GPU_CHOICES)
    job.stats = rng.random() < 0.7
    for pod in job.pods:
        pod.restarts = 0
    return job


def _timeline(created: float, wait: float, scale: float) -> list[tuple[float, str]]:
    return [
        (created, "Created"),
        (created + 5 * scale, "Pending"),
        (created + max(0.8 * wait, wait - 30 * scale), "Starting"),
        (created + wait, "Running"),
    ]


def populate(
    world: AihcWorld, *, seed: int, pool: str, now: float, scale: float = 1.0, hours: float = 6
) -> list[SimJob]:
    """The background stream (module docstring) in `pool`'s queues that `QUEUE_WAITS` knows."""
    world.in_step = True
    added = []
    queues = [q for q in world.pools[pool] if q in QUEUE_WAITS]
    span = int(hours * 3600 / EVERY)
    for q_index, queue in enumerate(queues):
        for k in range(-span, span + 1):
            rng = random.Random(f"{seed}:lifecycle:{pool}:{queue}:{k}")
            created = now + (k * EVERY + rng.uniform(0, EVERY / 2) + q_index * 60) * scale
            job = _job(world, rng, pool, queue, created, f"{queue}-{k % 1000:03d}")
            wait = _wait(rng, queue) * scale
            job.timeline = _timeline(created, wait, scale)
            _background_end(job, rng, created + wait, scale, failing=k % 4 == 0)
            job.event_script = [*_created_events(job), *(job.event_script or [])]
            added.append(job)
    return added


def _background_end(
    job: SimJob, rng: random.Random, started: float, scale: float, *, failing: bool
) -> None:
    run = rng.uniform(1800, 7200) * scale
    ended = started + run
    if failing:
        job.timeline.append((ended, "Failed"))
        job.event_script, job.pods[0].reason = failure_events("user_exit", job, ended)
    elif rng.random() < 0.25:
        # One restart: two minutes in Restarting, then on to the end.
        mid = started + run / 2
        job.timeline += [(mid, "Restarting"), (mid + 120 * scale, "Running")]
        job.timeline.append((ended, "Succeeded"))
    else:
        job.timeline.append((ended, "Succeeded"))
    job.removed_at = ended + 4 * 3600 * scale


def plant(
    world: AihcWorld, *, seed: int, pool: str, now: float, scale: float = 1.0
) -> list[Planted]:
    """The planted cases (module docstring), in `PLANTED_QUEUE` of `pool`."""
    world.in_step = True
    rng = random.Random(f"{seed}:lifecycle-plant")
    planted = []
    fail_at = now + PLANTED_FAIL_AFTER
    classes: Sequence[str] = (*FAILURE_CLASSES, "hardware", "hardware")
    for index, failure_class in enumerate(classes):
        created = now - (3600 + 60 * index) * scale
        job = _job(world, rng, pool, PLANTED_QUEUE, created, f"planted-{failure_class}-{index}")
        if failure_class in BEFORE_RUNNING:
            job.timeline = [(created, "Created"), (created + 5 * scale, "Pending")]
        else:
            job.timeline = _timeline(created, 120 * scale, scale)
        job.timeline.append((fail_at, "Failed"))
        events, job.pods[0].reason = failure_events(failure_class, job, fail_at)
        job.event_script = [*_created_events(job), *events]
        job.removed_at = fail_at + 4 * 3600 * scale
        planted.append(Planted(failure_class, job.job_id, PLANTED_QUEUE))
    planted.append(_plant_pending(world, rng, pool, now, scale))
    planted.append(_plant_loop(world, rng, pool, now, scale))
    return planted


def _plant_pending(
    world: AihcWorld, rng: random.Random, pool: str, now: float, scale: float
) -> Planted:
    """A job that has waited twenty times its queue's longest wait, and waits on."""
    created = now - 20 * QUEUE_WAITS[PLANTED_QUEUE][1] * scale
    job = _job(world, rng, pool, PLANTED_QUEUE, created, "planted-pending")
    job.timeline = [(created, "Created"), (created + 5 * scale, "Pending")]
    job.event_script = [
        *_created_events(job),
        _event(
            created + 10 * scale,
            "FailedScheduling",
            "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.",
            "Warning",
            40,
        ),
    ]
    return Planted("pending", job.job_id, PLANTED_QUEUE)


def _plant_loop(
    world: AihcWorld, rng: random.Random, pool: str, now: float, scale: float
) -> Planted:
    """A running job whose first pod restarts every `LOOP_EVERY`, spending a minute of each
    in Restarting, from about an hour before `now` on."""
    created = now - 2 * 3600 * scale
    job = _job(world, rng, pool, PLANTED_QUEUE, created, "planted-restart-loop")
    job.timeline = _timeline(created, 60 * scale, scale)
    every = LOOP_EVERY * scale
    # Half a cycle into a run at `now`: read at once, it is Running.
    at = now - (3600 - LOOP_EVERY / 2) * scale
    while at < now + 6 * 3600 * scale:
        job.timeline += [(at, "Restarting"), (at + 60 * scale, "Running")]
        at += every
    job.pods[0].restart_every = every
    job.event_script = [*_created_events(job)]
    job.removed_at = None
    return Planted("restart-loop", job.job_id, PLANTED_QUEUE)


def planted_lines(planted: Sequence[Planted]) -> list[str]:
    """What `simulate` prints for each planted case (the end-to-end test reads them)."""
    return [f"AIHC lifecycle {p.case}: job {p.job_id}, queue {p.queue}" for p in planted]


def describe(job: SimJob) -> str:
    """One line of a job's timeline, for debugging a world."""
    return ", ".join(f"{status} {rfc3339(at)}" for at, status in job.timeline)
