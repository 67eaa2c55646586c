"""A synthetic pool of training jobs, as the providers would report it, at any size.

The shape follows a big GPU pool: jobs of 8 pods (1 master, 7 workers), 8 cards per pod, half
the jobs on an AIHC resource pool (long `pytorchjob-<uuid>` ids, pool and queue set) and half on
Alaya (short `job-…` ids, empty pool and queue). Each pod carries 18 pod series and 4 per-card
families (32 series), each job 9 job series: ~51 series per pod and 27 families, so 100k series
is 2,000 pods x 8 cards. Values look like upstream's (ratios to 4 places, byte rates, unix
timestamps); label tuples and strings are allocated as the real mappings allocate them.
Deterministic for a seed, so both exporters serve the same text.
"""

from __future__ import annotations

import random
import string
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from exporter.model import (
    CARD_LABELS,
    JOB_LABELS,
    POD_LABELS,
    TARGET_LABELS,
    Sample,
    TargetSnapshot,
    Update,
    merge,
)
from exporter.providers.aihc.mapping import label
from exporter.providers.base import Listing, PollContext, ReadContext, ReadResult, Unit
from exporter.status import CallLog
from exporter.store import SnapshotStore
from exporter.transport.gate import Gate
from exporter.work.tiers import resolve

# Staleness bounds of the synthetic pool's parts (read in the fast tier).
BOUNDS = {"fast": 180.0}
PODS_PER_JOB = 8
CARDS_PER_POD = 8
SERIES_PER_POD = 50
NOW = 1_767_225_600.0

_CARD_FAMILIES = (
    "training_pod_gpu_utilization_ratio",
    "training_pod_gpu_memory_utilization_ratio",
    "training_pod_gpu_utilization_window_max_ratio",
    "training_pod_gpu_utilization_window_avg_ratio",
)
_RATIO_FAMILIES = (
    "training_pod_cpu_utilization_ratio",
    "training_pod_memory_utilization_ratio",
)
_RATE_FAMILIES = (
    "training_pod_cpu_used_cores",
    "training_pod_memory_used_bytes",
    "training_pod_disk_read_bytes_per_second",
    "training_pod_disk_write_bytes_per_second",
    "training_pod_rdma_transmit_bytes_per_second",
    "training_pod_rdma_receive_bytes_per_second",
    "training_pod_pcie_transmit_bytes_per_second",
    "training_pod_pcie_receive_bytes_per_second",
    "training_pod_nvlink_transmit_bytes_per_second",
    "training_pod_nvlink_receive_bytes_per_second",
)
_IMAGE = (
    "registry.baidubce.com/aihc-aiak/aiak-megatron:"
    "ubuntu20.04-cu11.8-torch1.14.0-py38_v1.2.7.12_release"
)
_EVENTS = (("Normal", "Scheduled"), ("Warning", "BackOff"))


@dataclass(frozen=True, slots=True)
class Target:
    provider: str
    target: str
    resource_pool: str
    queue: str
    job_ids: tuple[str, ...]


def plan(series: int, seed: int = 7) -> tuple[Target, ...]:
    """Targets and job ids for about `series` series (pods = series / 50, whole jobs)."""
    rng = random.Random(seed)
    jobs = max(2, round(series / SERIES_PER_POD / PODS_PER_JOB))
    aihc_jobs = jobs // 2
    pool = "cce-" + "".join(rng.choices(string.ascii_lowercase + string.digits, k=8))
    aihc_ids = tuple(
        f"pytorchjob-{uuid.UUID(int=rng.getrandbits(128), version=4)}" for _ in range(aihc_jobs)
    )
    alaya_ids = tuple(
        "job-" + "".join(rng.choices(string.ascii_lowercase + string.digits, k=12))
        for _ in range(jobs - aihc_jobs)
    )
    return (
        Target("aihc", "pool-llm", pool, "llm-pretrain", aihc_ids),
        Target("alaya", "alaya-main", "", "", alaya_ids),
    )


MakeSample = Callable[[str, tuple[str, ...], tuple[str, ...], float], Sample]


def _aihc_sample(
    name: str, names: tuple[str, ...], values: tuple[str, ...], value: float
) -> Sample:
    # As AIHC's mapping does: fresh label-name tuple, every value through `label()`.
    return Sample(name, (*names,), tuple([label(v) for v in values]), value)


def _alaya_sample(
    name: str, names: tuple[str, ...], values: tuple[str, ...], value: float
) -> Sample:
    # As Alaya's mapping does: a pod's strings shared, a fresh tuple per sample.
    return Sample(name, names, (*values,), value)


Parts = dict[str, dict[str, tuple[Sample, ...]]]


class _Parts:
    """Job -> part -> samples, as a provider's reads fill them."""

    def __init__(self) -> None:
        self.jobs: Parts = {}

    def put(self, job_id: str, part: str, samples: tuple[Sample, ...]) -> None:
        self.jobs.setdefault(job_id, {})[part] = samples


def job_parts(target: Target, seed: int = 7, only: Sequence[str] | None = None) -> Parts:
    """Every part of every job of `target` (or of the jobs `only` names; "": the target's own
    part) after one full read, as a provider builds them."""
    rng = random.Random(f"{seed}-{target.target}")
    make = _aihc_sample if target.provider == "aihc" else _alaya_sample
    result = _Parts()
    for job_id in target.job_ids if only is None else [j for j in only if j]:
        job = (target.provider, target.resource_pool, target.queue, job_id)
        _put_job(result, rng, job, make)
        pods = [f"{job_id}-master-0"] + [f"{job_id}-worker-{i}" for i in range(PODS_PER_JOB - 1)]
        _put_pods(result, rng, job, pods, make)
    if target.provider == "alaya" and (only is None or "" in only):
        window = Sample(
            "training_alaya_query_window_seconds",
            TARGET_LABELS,
            (target.provider, target.target),
            900.0,
        )
        result.put("", "window", (window,))
    return result.jobs


def part_names(target: Target) -> dict[str, frozenset[str]]:
    """Each job's part names (and the target's own parts, under ""), as a job list names them."""
    first = job_parts(target, 0, [target.job_ids[0], ""])
    names = frozenset(first[target.job_ids[0]])
    found = dict.fromkeys(target.job_ids, names)
    if "" in first:
        found[""] = frozenset(first[""])
    return found


def _put_job(result: _Parts, rng: random.Random, job: tuple[str, ...], make: MakeSample) -> None:
    job_id = job[3]
    info_labels = (*JOB_LABELS, "job_name", "job_type", "priority", "user_id", "image")
    info = (
        f"llama-70b-sft-{job_id[-6:]}",
        "PyTorchJob",
        "normal",
        f"{rng.getrandbits(128):032x}",
        _IMAGE,
    )
    created = NOW - rng.randrange(3600, 86400 * 7)
    listed = (
        make("training_job_info", info_labels, (*job, *info), 1.0),
        make("training_job_status", (*JOB_LABELS, "status"), (*job, "Pending"), 0.0),
        make("training_job_status", (*JOB_LABELS, "status"), (*job, "Running"), 1.0),
        make("training_job_created_timestamp_seconds", JOB_LABELS, job, created),
        make("training_job_replicas", JOB_LABELS, job, float(PODS_PER_JOB)),
    )
    result.put(job_id, "list", listed)
    event_labels = (*JOB_LABELS, "event_type", "reason")
    events: list[Sample] = []
    for event in _EVENTS:
        events.append(
            make(
                "training_job_events_total",
                event_labels,
                (*job, *event),
                float(rng.randrange(1, 40)),
            )
        )
        events.append(
            make(
                "training_job_last_event_timestamp_seconds",
                event_labels,
                (*job, *event),
                created + rng.randrange(60, 3600),
            )
        )
    result.put(job_id, "events", tuple(events))


def _put_pods(
    result: _Parts,
    rng: random.Random,
    job: tuple[str, ...],
    pods: list[str],
    make: MakeSample,
) -> None:
    job_id = job[3]
    detail: list[Sample] = []
    by_family: dict[str, list[Sample]] = {}
    for index, pod in enumerate(pods):
        labels = (*job, pod)
        replica = "Master" if index == 0 else "Worker"
        node = f"192.168.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        pod_ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        detail += [
            make(
                "training_pod_info",
                (*POD_LABELS, "replica_type", "node", "pod_ip"),
                (*labels, replica, node, pod_ip),
                1.0,
            ),
            make("training_pod_phase", (*POD_LABELS, "phase"), (*labels, "Pending"), 0.0),
            make("training_pod_phase", (*POD_LABELS, "phase"), (*labels, "Running"), 1.0),
            make("training_pod_restarts", POD_LABELS, labels, float(rng.randrange(3))),
        ]
        for name in _RATIO_FAMILIES:
            by_family.setdefault(name, []).append(
                make(name, POD_LABELS, labels, round(rng.random(), 4))
            )
        for name in _RATE_FAMILIES:
            by_family.setdefault(name, []).append(
                make(name, POD_LABELS, labels, float(rng.randrange(10**6, 10**10)))
            )
        by_family.setdefault("training_pod_rdma_healthy", []).append(
            make("training_pod_rdma_healthy", POD_LABELS, labels, 1.0)
        )
        by_family.setdefault("training_pod_last_sample_timestamp_seconds", []).append(
            make(
                "training_pod_last_sample_timestamp_seconds",
                POD_LABELS,
                labels,
                NOW - rng.randrange(60),
            )
        )
        for card in range(CARDS_PER_POD):
            card_labels = (*labels, f"NVIDIA-H800A-NV-80G-{card}")
            for name in _CARD_FAMILIES:
                by_family.setdefault(name, []).append(
                    make(name, CARD_LABELS, card_labels, round(rng.random(), 4))
                )
    result.put(job_id, "detail", tuple(detail))
    for name, samples in by_family.items():
        result.put(job_id, f"metric:{name}", tuple(samples))


def snapshots(series: int, seed: int = 7) -> list[TargetSnapshot]:
    """The targets' snapshots after one poll each, through the exporter's real merge."""
    out = []
    for target in plan(series, seed):
        previous = TargetSnapshot.empty(target.provider, target.target)
        update = Update.of(job_parts(target, seed))
        out.append(merge(previous, update, NOW, BOUNDS).snapshot)
    return out


def fill(store: SnapshotStore, series: int, seed: int = 7) -> int:
    """Swap a synthetic snapshot of every target into `store`; the series count."""
    total = 0
    for snapshot in snapshots(series, seed):
        store.swap(snapshot)
        total += snapshot.series
    return total


class ListedProvider:
    """A provider whose job list carries every part of every job, so it makes no per-job
    calls: what the benchmarks and tests that make their own samples plug into the app."""

    def __init__(self, provider: str, target: str, poll_interval: float = 60.0) -> None:
        self.provider = provider
        self.target = target
        self.tiers = resolve(provider, (), poll_interval, {}, {})
        self.gate = Gate()
        self.call_log = CallLog()

    def parts(self) -> Parts:
        raise NotImplementedError

    async def list_jobs(self, context: PollContext) -> Listing:
        parts = self.parts()
        return Listing(
            parts={job: frozenset(p) for job, p in parts.items()},
            readings={job: dict(p) for job, p in parts.items()},
        )

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        raise AssertionError("a listed provider has no units")

    async def close(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {}
