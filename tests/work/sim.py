"""A fake provider and a runner on simulated time (`tests.work.virtual`): one AIHC-shaped
target whose every call passes the real `Gate` (its request budget) and is logged with its
time."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict
from collections.abc import Iterable

from exporter.model import JOB_LABELS, Sample
from exporter.providers.base import Listing, PollContext, ReadContext, ReadResult, TierPlan, Unit
from exporter.selfmetrics import SelfMetrics
from exporter.status import CallLog
from exporter.store import SnapshotStore
from exporter.transport.gate import Gate
from exporter.work.runner import TargetRunner
from tests.work.virtual import VirtualLoop

FAST = ("GpuUsage", "GpuMemoryUsage")
MEDIUM = ("pods", "CpuUsage", "MemoryUsage")
SLOW = ("GpuTemperature", "CpuTime")
ITEMS = (*FAST, *MEDIUM, *SLOW)
TIER = {
    **dict.fromkeys(FAST, "fast"),
    **dict.fromkeys(MEDIUM, "medium"),
    **dict.fromkeys(SLOW, "slow"),
}


def tiers(fast: float = 60.0, items: tuple[str, ...] = ITEMS) -> TierPlan:
    members = {t: tuple(i for i in items if TIER[i] == t) for t in ("fast", "medium", "slow")}
    intervals = {"fast": fast, "medium": 5 * fast, "slow": 15 * fast}
    return TierPlan(intervals, members, frozenset({"pods"}) & frozenset(items))


class FakeProvider:
    provider = "aihc"
    target = "sim"

    def __init__(
        self,
        loop: VirtualLoop,
        jobs: Iterable[str],
        *,
        rate: float = 10.0,
        fast: float = 60.0,
        items: tuple[str, ...] = ITEMS,
        latency: float = 0.05,
    ) -> None:
        self.loop = loop
        self.jobs = list(jobs)
        self.items = items
        self.tiers = tiers(fast, items)
        self.rate = rate
        # A target rebuilt by a reload goes on from its gate's writes (`TargetRunner._carry`).
        self.gate = Gate(rate, loop.time)
        self.call_log = CallLog()
        self.latency = latency
        self.failing = False
        self.finished: list[str] = []
        self._finals_given: set[str] = set()
        # (time, job, item) of every read; "" for a listing
        self.log: list[tuple[float, str, str]] = []

    async def _send(self, job: str, item: str, deadline: float) -> None:
        await self.gate.admit(deadline)
        self.log.append((self.loop.time(), job, item))
        await asyncio.sleep(self.latency)

    async def list_jobs(self, context: PollContext) -> Listing:
        await self._send("", "", context.deadline)
        if self.failing:
            return Listing(listed=False, failed_requests=1, requests=1)
        sample = Sample("training_job_replicas", JOB_LABELS, ("aihc", "p", "q", "j"), 1.0)
        jobs = [j for j in self.jobs if j not in self.finished]
        out = Listing(requests=1, units=[Unit(j, j, self.items) for j in jobs])
        out.parts = {j: frozenset({"job", *self.items}) for j in [*jobs, *self.finished]}
        out.readings = {j: {"job": (sample,)} for j in jobs}
        # A finished job's final read is asked for once, as AIHC's provider does.
        out.finals = [Unit(j, j, ("pods",)) for j in self.finished if j not in self._finals_given]
        self._finals_given.update(self.finished)
        return out

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        await self._send(unit.job_id, item, context.deadline)
        labels = ("aihc", "p", "q", unit.job_id)
        return ReadResult(unit.job_id, {item: (Sample(f"m_{item}", JOB_LABELS, labels, 1.0),)})

    async def close(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {}

    def reads(self, since: float = 0.0, until: float = 1e18) -> dict[tuple[str, str], list[float]]:
        found: dict[tuple[str, str], list[float]] = defaultdict(list)
        for at, job, item in self.log:
            if job and since <= at < until:
                found[(job, item)].append(at)
        return found


def runner(
    provider: FakeProvider,
    metrics: SelfMetrics | None = None,
    store: SnapshotStore | None = None,
    previous: TargetRunner | None = None,
    workers: int = 8,
) -> TargetRunner:
    return TargetRunner(
        provider,  # type: ignore[arg-type]
        store or SnapshotStore(),
        metrics or SelfMetrics(),
        budget=provider.rate,
        workers=workers,
        clock=provider.loop.time,
        previous=previous,
    )


def gaps(times: list[float], since: float, until: float) -> float:
    """The longest stretch in [since, until] without a read (from the last one before)."""
    before = [t for t in times if t < since]
    marks = [before[-1] if before else since, *[t for t in times if since <= t <= until], until]
    return max(b - a for a, b in itertools.pairwise(marks))
