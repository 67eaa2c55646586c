"""The data that flows one way: provider -> samples -> snapshot -> exposition.

A poll of one target yields a `PollResult`: for each job, named parts (the job list entry,
the pod detail, one metric type, the events), each either its samples or `FAILED`. `merge`
turns it and the target's previous snapshot into the next immutable `TargetSnapshot`: a
failed part keeps its last good samples until they are older than `stale_after`; a job or
part that the result does not name is gone. Nothing else decides what is stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, NamedTuple

JOB_LABELS: Final = ("provider", "resource_pool", "queue", "job_id")
POD_LABELS: Final = (*JOB_LABELS, "pod")
CARD_LABELS: Final = (*POD_LABELS, "gpu")
TARGET_LABELS: Final = ("provider", "target")


class Sample(NamedTuple):
    """One series: `name` is the sample name as exposed (a counter's ends in `_total`)."""

    name: str
    label_names: tuple[str, ...]
    label_values: tuple[str, ...]
    value: float


class Failed:
    """Marks a part whose call failed this poll."""

    _instance: Failed | None = None

    def __new__(cls) -> Failed:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "FAILED"


FAILED: Final = Failed()

PartOutcome = tuple[Sample, ...] | Failed


@dataclass(frozen=True, slots=True)
class Part:
    samples: tuple[Sample, ...]
    fetched_at: float


@dataclass(frozen=True, slots=True)
class JobData:
    job_id: str
    parts: Mapping[str, Part]

    @property
    def series(self) -> int:
        return sum(len(p.samples) for p in self.parts.values())


@dataclass(frozen=True, slots=True)
class TargetSnapshot:
    """Everything one target currently exports. Never mutated: the store swaps it whole."""

    provider: str
    target: str
    jobs: Mapping[str, JobData]
    taken_at: float
    series: int

    @classmethod
    def empty(cls, provider: str, target: str) -> TargetSnapshot:
        return cls(provider, target, MappingProxyType({}), 0.0, 0)

    def samples(self) -> list[Sample]:
        return [s for job in self.jobs.values() for p in job.parts.values() for s in p.samples]


@dataclass(slots=True)
class PollResult:
    """What one poll of a target learnt.

    `listed` False means the job list itself could not be read, so the poll cannot tell which
    jobs still exist: every previous job is carried over under the staleness rule.
    `failed_requests` counts calls that failed after their retries; any makes up 0.
    """

    jobs: dict[str, dict[str, PartOutcome]] = field(default_factory=dict)
    listed: bool = True
    failed_requests: int = 0

    def put(self, job_id: str, part: str, outcome: PartOutcome) -> None:
        self.jobs.setdefault(job_id, {})[part] = outcome

    @property
    def ok(self) -> bool:
        return self.listed and self.failed_requests == 0


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    snapshot: TargetSnapshot
    stale_parts: int
    expired_parts: int
    jobs_left_out: tuple[str, ...]


def _carry(previous: Part | None, now: float, stale_after: float) -> Part | None:
    if previous is not None and now - previous.fetched_at <= stale_after:
        return previous
    return None


def merge(
    previous: TargetSnapshot,
    result: PollResult,
    now: float,
    stale_after: float,
    max_series: int | None = None,
) -> MergeOutcome:
    """The next snapshot of a target from its previous one and a poll's result."""
    stale = expired = 0
    wanted: dict[str, dict[str, PartOutcome]] = dict(result.jobs)
    if not result.listed:
        for job_id, job in previous.jobs.items():
            outcomes = wanted.setdefault(job_id, {})
            for name in job.parts:
                outcomes.setdefault(name, FAILED)
    jobs: dict[str, JobData] = {}
    left_out: list[str] = []
    total = 0
    # Jobs already exported come first, so the series limit never swaps one job for another.
    for job_id in sorted(wanted, key=lambda j: j not in previous.jobs):
        outcomes = wanted[job_id]
        old_job = previous.jobs.get(job_id)
        parts: dict[str, Part] = {}
        for name, outcome in outcomes.items():
            if isinstance(outcome, Failed):
                kept = _carry(old_job.parts.get(name) if old_job else None, now, stale_after)
                if kept is None:
                    expired += 1
                    continue
                stale += 1
                parts[name] = kept
            else:
                parts[name] = Part(outcome, now)
        if not parts:
            continue
        job = JobData(job_id, MappingProxyType(parts))
        if max_series is not None and total + job.series > max_series:
            left_out.append(job_id)
            continue
        total += job.series
        jobs[job_id] = job
    snapshot = TargetSnapshot(
        previous.provider, previous.target, MappingProxyType(jobs), now, total
    )
    return MergeOutcome(snapshot, stale, expired, tuple(left_out))
