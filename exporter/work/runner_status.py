"""What a target's runner shows the status pages: one immutable snapshot (`RunnerStatus`),
taken by `TargetRunner.status()`. The pages (`exporter.web`) read a runner only through it:
an import-linter contract keeps them off the rest of `exporter.work`.

Every field is a value or a frozen record: the call log's rings as tuples, the health as a
`TargetState`, each job's `JobReads` (never changed in place), the store's snapshot (already
immutable) and the plan. Ages are against `taken_at`, the runner's monotonic clock when the
snapshot was taken, which the store's read times use too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from exporter.model import TargetSnapshot
from exporter.status import CallLog, CallRecord, Health, JobReads
from exporter.work.plan import Plan

__all__ = ["CallHistory", "CallRecord", "JobReads", "Plan", "RunnerStatus", "TargetState"]


@dataclass(frozen=True, slots=True)
class TargetState:
    """The target's state and since when (wall clock): starting, up, down, paused or refused."""

    state: str
    since: float
    last_good_round: float | None
    paused_until: float | None

    @classmethod
    def of(cls, health: Health) -> TargetState:
        return cls(health.state, health.since, health.last_good_round, health.paused_until)


@dataclass(frozen=True, slots=True)
class CallHistory:
    """The target's recent attempts and failures, oldest first, and their counts."""

    recent: tuple[CallRecord, ...]
    failures: tuple[CallRecord, ...]
    total: int
    failed_since_success: int
    last_success_at: float | None
    finished_last_minute: int

    @classmethod
    def of(cls, log: CallLog) -> CallHistory:
        return cls(
            tuple(log.recent),
            tuple(log.failures),
            log.total,
            log.failed_since_success,
            log.last_success_at,
            log.finished_last_minute(),
        )

    @property
    def last_error(self) -> CallRecord | None:
        return self.failures[-1] if self.failures else None


@dataclass(frozen=True, slots=True)
class RunnerStatus:
    provider: str
    target: str
    # What the provider says of its target (endpoint, pool, queues, jobs listed).
    details: Mapping[str, str]
    health: TargetState
    call_history: CallHistory
    # Each listed job's reads.
    jobs: Mapping[str, JobReads]
    plan: Plan
    # How long each tier's parts outlive their last read.
    bounds: Mapping[str, float]
    snapshot: TargetSnapshot
    # The runner's monotonic clock when this was taken.
    taken_at: float
