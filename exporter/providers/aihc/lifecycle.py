"""AIHC's side of a job's life (`exporter.providers.kit.lifecycle`): which of its statuses
are which kind, the failure rules in its own spellings, and the job series that come of them.

Per listed job: `training_job_started_timestamp_seconds`, `training_job_queue_wait_seconds`
(where they are known), `training_job_gpus_per_pod` (the quantity of the GPU resource of
`jobSpec.resources`, else the target's `gpus_per_pod`), and, for a failed job whose reads are
in, `training_job_failure_class`. With each DescribeJob of a job that has run,
`training_job_restarting_seconds`, in the pods' part.

Which failed jobs get reads for their class: every job the exporter watched (its final read
of pods and events, as before), and one it never watched (a job that failed before it ran)
if it finished at most `FAILURE_LOOKBACK` before it was first listed failed: an exporter that
starts beside a long history does not spend two calls on each old failure.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from typing import Final

from exporter.model import Sample
from exporter.providers.aihc.mapping import (
    JobIdentity,
    job_sample,
    parse_event_time,
    parse_rfc3339,
)
from exporter.providers.aihc.models import Event, Job, JobDetail
from exporter.providers.aihc.target import NAME, AihcTarget
from exporter.providers.kit import failures as f
from exporter.providers.kit.failures import Classifier, Evidence, Rule
from exporter.providers.kit.lifecycle import (
    ENDED,
    FAILED,
    RESTARTING,
    RUNNING,
    WAITING,
    Lifecycles,
    kinds,
)
from exporter.providers.kit.numbers import parse_number

# Inferred from the statuses seen (docs/metrics.md): before a job first runs, and its ends.
STATUS_KINDS: Final = (
    (frozenset({"Created", "Pending", "Scheduled", "Starting"}), WAITING),
    (frozenset({"Running"}), RUNNING),
    (frozenset({"Restarting"}), RESTARTING),
    (frozenset({"Failed", "Abnormal"}), FAILED),
    (frozenset({"Succeeded", "Stopped"}), ENDED),
)
FAILURE_LOOKBACK: Final = 86400.0
STARTED: Final = "training_job_started_timestamp_seconds"
QUEUE_WAIT: Final = "training_job_queue_wait_seconds"
# A resource is a GPU when its name (after the vendor's domain) ends so:
# `baidu.com/a800_80g_cgpu` (Baidu's SDK), `nvidia.com/gpu` (Kubernetes).
_GPU_RESOURCE = re.compile(r"(?i)(?:^|/)[\w.-]*gpu$")
_EXIT = r"(?:exited with code|exitCode:)\s*"

RULES: Final = (
    Rule(
        f.HARDWARE,
        "FailedToStartFaultTolerance",
        None,
        "observed",
        "Pytorchjob: test-api-llama2-7b-4， failed to start fault tolerance。"
        "Reason：check all nodes are healthy。",
    ),
    Rule(f.HARDWARE, None, r"\bXid\b", "inferred", "NVRM: Xid (PCI:0000:3b:00): 79"),
    Rule(
        f.HARDWARE,
        None,
        r"(?i)\bECC\b|uncorrectable|fallen off the bus",
        "inferred",
        "GPU has fallen off the bus",
    ),
    Rule(f.HARDWARE, r"NodeNotReady|NodeLost", None, "inferred", "Node is not ready"),
    Rule(f.PREEMPTED, r"Preempted|Preempting|Evicted|Evicting", None, "inferred", "Evicted"),
    Rule(f.PREEMPTED, None, r"(?i)\bpreempt|\bevict", "inferred", "Pod was preempted"),
    Rule(f.OOM, r"OOMKilled|OOMKilling|SystemOOM", None, "inferred", "OOMKilled"),
    Rule(f.OOM, None, r"(?i)out of memory|\bOOMKilled\b", "inferred", "CUDA out of memory"),
    Rule(f.OOM, None, _EXIT + r"137\b", "inferred", "exited with code 137"),
    Rule(
        f.COLLECTIVE,
        None,
        r"(?i)\bnccl|watchdog|collective operation timeout|\bhang",
        "inferred",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
    ),
    Rule(
        f.USER_EXIT,
        "ExitedWithCode",
        _EXIT + r"[1-9]\d*",
        "observed",
        "Pod: default.test-api-llama2-7b-4-master-0 exited with code 1",
    ),
    # The event's reason, and a pod's (Kubernetes' reason for a non-zero exit).
    Rule(
        f.USER_EXIT,
        "Error",
        None,
        "observed",
        "Error pod test-api-llama2-7b-4-master-0 container pytorch exitCode: 1 terminated",
    ),
    Rule(
        f.IMAGE_PULL,
        r"ErrImagePull|ImagePullBackOff|InvalidImageName|ErrImageNeverPull",
        None,
        "inferred",
        "ImagePullBackOff",
    ),
    Rule(f.IMAGE_PULL, None, r"(?i)pull(?:ing)? image", "inferred", 'Failed to pull image "…"'),
    Rule(f.SCHEDULING, r"FailedScheduling|Unschedulable", None, "inferred", "FailedScheduling"),
    Rule(
        f.SCHEDULING,
        None,
        r"(?i)nodes are available|insufficient \S*gpu",
        "inferred",
        "0/16 nodes are available: 16 Insufficient nvidia.com/gpu.",
    ),
)


def gpus_in_spec(job: Job) -> float | None:
    """GPUs per pod the job's spec asks for: the GPU resources' quantities summed, or None
    when it names none (or only unusable quantities)."""
    found = None
    for resource in job.job_spec.resources or ():
        if _GPU_RESOURCE.search(resource.name):
            value, _ = parse_number(resource.quantity)
            if value is not None and value >= 0:
                found = (found or 0.0) + value
    return found


def _seconds(raw: object) -> float | None:
    value, _ = parse_number(raw)
    return None if value is None or value < 0 else value / 1e9


class AihcLifecycle:
    """The lifecycle series of one target's jobs, and the evidence of their failures.
    Unusable values here were counted as dropped by `mapping.job_samples` already."""

    def __init__(self, target: AihcTarget, final_items: Sequence[str]) -> None:
        self.lives = Lifecycles(Classifier(RULES), NAME, target.name)
        self.gpus_per_pod = float(target.gpus_per_pod)
        self.final_items = tuple(final_items)
        self._recent: set[str] = set()

    def job_samples(
        self, job: Job, who: JobIdentity, now: float
    ) -> tuple[list[Sample], list[Sample]]:
        """The job's lifecycle series from its listing: those a listing seldom changes, and
        apart from them its queue wait, which grows at every listing while the job waits."""
        kind = kinds(STATUS_KINDS, job.status)
        created = parse_rfc3339(job.created_at) if job.created_at.strip() else None
        end = parse_rfc3339(job.finished_at) if job.finished_at.strip() else None
        timing = self.lives.listed(
            job.job_id, kind, created, (end, _seconds(job.run_time_nanoseconds)), now
        )
        if kind == FAILED and (end is None or now - end <= FAILURE_LOOKBACK):
            self._recent.add(job.job_id)
        samples = []
        if timing.started is not None:
            samples.append(job_sample(STARTED, who, timing.started))
        # It grows at every listing while the job waits: with the usage, not the info.
        waited = []
        if timing.queue_wait is not None:
            waited.append(job_sample(QUEUE_WAIT, who, timing.queue_wait))
        spec = gpus_in_spec(job)
        source = "setting" if spec is None else "spec"
        gpus = self.gpus_per_pod if spec is None else spec
        samples.append(job_sample("training_job_gpus_per_pod", who, gpus, source=source))
        verdict = self.lives.verdict(job.job_id)
        if verdict is not None:
            found = {"class": verdict.failure_class}
            samples.append(job_sample("training_job_failure_class", who, 1.0, **found))
        return samples, waited

    def wants_final(self, job_id: str) -> bool:
        """Whether a failed job is due reads for its class (pods and events, once)."""
        return job_id in self._recent and self.lives.expect(job_id, self.final_items)

    def detail(self, who: JobIdentity, detail: JobDetail, now: float) -> list[Sample]:
        """A DescribeJob: its status timeline and its pods' failure reasons; the time it spent
        restarting, read with its pods (and in their part, so it comes and goes with them)."""
        entries = [
            (at, kinds(STATUS_KINDS, e.condition_type))
            for e in detail.time_line or ()
            if (at := parse_event_time(e.time)) is not None
        ]
        restarting = self.lives.timeline(who.job_id, entries, now) if entries else None
        self.lives.evidence(
            who.job_id, (Evidence(p.reason, "", True) for p in detail.pods or () if p.reason)
        )
        if restarting is None:
            return []
        return [job_sample("training_job_restarting_seconds", who, restarting)]

    def events(self, job_id: str, events: Iterable[Event]) -> None:
        self.lives.evidence(
            job_id, (Evidence(e.reason, e.message, e.type == "Warning") for e in events)
        )

    def read_done(self, job_id: str, item: str) -> None:
        self.lives.read_done(job_id, item)

    def keep(self, job_ids: Collection[str]) -> None:
        self.lives.keep(job_ids)
        self._recent &= set(job_ids)
