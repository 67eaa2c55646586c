"""A target's health as its rounds go: `up`, its state and since when, and what its pages
show of its history (the client's call log, each job's reads).

`up` is 1 when the round's listing and every call that ended since the previous round
succeeded, and the target is neither paused (Retry-After) nor refused (credentials). It goes
to 0 as soon as a publish sees a failure, and back to 1 only when a round ends without one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from exporter.selfmetrics import SelfMetrics
from exporter.status import CallLog, Health, JobReads, JobTrack
from exporter.transport.gate import Gate
from exporter.work.runner_status import CallHistory, TargetState


class TargetHealth:
    def __init__(
        self,
        labels: tuple[str, str],
        metrics: SelfMetrics,
        gate: Gate,
        call_log: CallLog,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.labels, self.metrics, self.gate, self._clock = labels, metrics, gate, clock
        # The provider client's recent attempts (the transport writes them).
        self.call_log = call_log
        # The target's state and since when.
        self.state = Health()
        # Each listed job's reads, for the jobs page.
        self.jobs = JobTrack()
        # Calls that failed since the round began, and whether its listing was read.
        self.failed = 0
        self.listed = True

    def carry(self, previous: TargetHealth) -> None:
        """Go on from the same target's health before a reload rebuilt its runner."""
        self.call_log.carry(previous.call_log)
        self.state, self.jobs = previous.state, previous.jobs

    @property
    def ok(self) -> bool:
        return self.listed and self.failed == 0 and self.gate.open

    def set_up(self) -> None:
        """`up`, and the state the pages show, as the round stands."""
        ok, gate, now = self.ok, self.gate, time.time()
        paused = gate.paused
        self.metrics.up.labels(*self.labels).set(1 if ok else 0)
        self.state.paused_until = now + gate.paused_until - self._clock() if paused else None
        if ok:
            self.metrics.last_success.labels(*self.labels).set(now)
            self.state.last_good_round = now
        state = "up" if ok else "refused" if gate.blocked else "paused" if paused else "down"
        self.state.set(state, now)

    def round_over(self) -> None:
        """A round ended: `up` as it stands, and the next round counts failures afresh."""
        self.set_up()
        self.failed = 0

    def view(self) -> tuple[TargetState, CallHistory, Mapping[str, JobReads]]:
        """The state, the call history and each job's reads as they are now, immutable."""
        jobs = MappingProxyType(dict(self.jobs.jobs))
        return TargetState.of(self.state), CallHistory.of(self.call_log), jobs
