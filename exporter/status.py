"""What a target's pages show, kept as it happens: its recent calls and its state since when.

The transport writes a `CallRecord` per attempt into its target's `CallLog`; the runner writes
the target's `Health`. Both only append and overwrite small fields on the event loop, so the
web pages read them without a lock and never touch the exposition. Everything here is bounded:
the rings by their sizes, every string by the redactor (`exporter.redaction`), which the
transport passes what a provider answered through before it is recorded.

Which job an attempt belongs to is the `reading_job` context of the task making it: the
runner sets it around a read, so a provider's client does not have to pass it down.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Final, NamedTuple

RECENT_CALLS: Final = 200
RECENT_FAILURES: Final = 50
FINISHED_WINDOW: Final = 60.0

# The job the current task reads (None: the listing, or a call outside a read).
reading_job: ContextVar[str | None] = ContextVar("reading_job", default=None)


class CallRecord(NamedTuple):
    """One attempt as sent and answered. `code` is the metric's (bounded) code label. A
    tuple, immutable as a frozen dataclass but made in a third of the time: one an attempt."""

    at: float  # wall clock, when it ended
    endpoint: str
    job: str | None
    code: str
    attempt: int  # 1 for the first try
    duration: float  # seconds from its write to its reply
    size: int | None  # reply body bytes, None when no reply was read
    ok: bool
    # For failures: what the provider answered, redacted.
    status: int | None = None
    provider_code: str | None = None
    request_id: str | None = None
    message: str = ""


class CallLog:
    """A target's last RECENT_CALLS attempts and last RECENT_FAILURES failures."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.recent: deque[CallRecord] = deque(maxlen=RECENT_CALLS)
        self.failures: deque[CallRecord] = deque(maxlen=RECENT_FAILURES)
        self._finished: deque[float] = deque()
        self.last_success_at: float | None = None
        # Failed attempts since the last successful one.
        self.failed_since_success = 0
        self.total = 0

    def add(self, record: CallRecord) -> None:
        self.total += 1
        self.recent.append(record)
        self._finished.append(record.at)
        self._trim(record.at)
        if record.ok:
            self.last_success_at = record.at
            self.failed_since_success = 0
        else:
            self.failures.append(record)
            self.failed_since_success += 1

    def carry(self, other: CallLog) -> None:
        """Go on from `other` (the same target before a reload rebuilt its client): its calls,
        failures and counts come first, so a page still shows the error a state is down for."""
        for ring, older in ((self.recent, other.recent), (self.failures, other.failures)):
            newer = list(ring)
            ring.clear()
            ring.extend(older)
            ring.extend(newer)
        self._finished = deque(sorted([*other._finished, *self._finished]))
        self.total += other.total
        if self.last_success_at is None:
            self.last_success_at = other.last_success_at
            self.failed_since_success += other.failed_since_success

    @property
    def last_error(self) -> CallRecord | None:
        return self.failures[-1] if self.failures else None

    def finished_last_minute(self) -> int:
        """Attempts that ended (answered, failed or timed out) in the last FINISHED_WINDOW s."""
        self._trim(self._clock())
        return len(self._finished)

    def _trim(self, now: float) -> None:
        while self._finished and self._finished[0] < now - FINISHED_WINDOW:
            self._finished.popleft()


@dataclass(slots=True)
class Health:
    """A target's state and since when (wall clock), as the runner last set it: starting,
    up, down, paused (Retry-After) or refused (credentials)."""

    state: str = "starting"
    since: float = 0.0
    # When a round last ended with up 1 (wall clock), None before the first.
    last_good_round: float | None = None
    # Until when a Retry-After pauses the target (wall clock), when paused.
    paused_until: float | None = None

    def set(self, state: str, now: float | None = None) -> None:
        if state != self.state:
            self.state = state
            self.since = time.time() if now is None else now


@dataclass(frozen=True, slots=True)
class JobReads:
    """One job's reads as the runner took them (wall clock), and what they last said of it:
    kept while its listing names it, so a page still names the job when its series went stale
    in an outage. Never changed in place: `JobTrack` replaces it, so a status snapshot can
    hold it as it is."""

    # Tier -> when a read of that tier last ended, failed or not.
    last_read: Mapping[str, float] = field(default_factory=dict)
    # Tier -> when a read of that tier last succeeded.
    last_good: Mapping[str, float] = field(default_factory=dict)
    failures: int = 0
    last_failure_at: float | None = None
    # The job's name and status as last read, and when.
    name: str | None = None
    status: str | None = None
    named_at: float | None = None
    # Part -> the pods its last reading named (a pod list, or one pod's details).
    pods: Mapping[str, frozenset[str]] = field(default_factory=dict)
    pods_at: float | None = None

    @property
    def pod_count(self) -> int | None:
        return len(frozenset().union(*self.pods.values())) if self.pods else None


_NO_READS: Final = JobReads()


class JobTrack:
    """The reads of each job the target's last listing named: bounded by its `max_jobs`."""

    def __init__(self) -> None:
        self.jobs: dict[str, JobReads] = {}

    def read(self, job_id: str, tier: str, ok: bool, now: float | None = None) -> None:
        now = time.time() if now is None else now
        old = self.jobs.get(job_id) or _NO_READS
        last_read = {**old.last_read, tier: now}
        good, failures, failed_at = old.last_good, old.failures, old.last_failure_at
        if ok:
            good = {**good, tier: now}
        else:
            failures, failed_at = failures + 1, now
        # Made whole, not by `replace()`, which took twice as long: one a read.
        self.jobs[job_id] = JobReads(
            last_read=last_read,
            last_good=good,
            failures=failures,
            last_failure_at=failed_at,
            name=old.name,
            status=old.status,
            named_at=old.named_at,
            pods=old.pods,
            pods_at=old.pods_at,
        )

    def saw(self, job_id: str, part: str, facts: JobFacts, now: float | None = None) -> None:
        """What a reading of `part` said of the job (only what it says is changed)."""
        now = time.time() if now is None else now
        reads = self.jobs.get(job_id) or JobReads()
        if facts.name is not None or facts.status is not None:
            name = facts.name if facts.name is not None else reads.name
            status = facts.status if facts.status is not None else reads.status
            reads = replace(reads, name=name, status=status, named_at=now)
        if facts.pods is not None:
            reads = replace(reads, pods={**reads.pods, part: facts.pods}, pods_at=now)
        self.jobs[job_id] = reads

    def keep(self, parts: Mapping[str, Iterable[str]]) -> None:
        """Forget every job not in `parts` (the listing no longer names it), and the pods of
        parts its job no longer has."""
        for job_id in [j for j in self.jobs if j not in parts]:
            del self.jobs[job_id]
        for job_id, reads in self.jobs.items():
            named = set(parts[job_id])
            if any(p not in named for p in reads.pods):
                pods = {p: pods for p, pods in reads.pods.items() if p in named}
                self.jobs[job_id] = replace(reads, pods=pods)

    def forget(self, job_id: str) -> None:
        self.jobs.pop(job_id, None)


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What one reading says of its job: None where it says nothing."""

    name: str | None = None
    status: str | None = None
    pods: frozenset[str] | None = None
