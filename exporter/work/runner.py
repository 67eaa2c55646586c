"""One target's runner: rounds of job listing, a paced work queue, and snapshot publishing.

A round runs every effective fast-tier interval: it reads the job list and, when that
succeeded, re-plans the tiers for the counts it found (`planner`), tells the queue which units
to read, and publishes. A listing that failed changes nothing but `up` (`health`): known jobs
keep their schedule and parts, the plan its last good counts. Meanwhile `workers` tasks take
due calls from the queue, their outcomes merged into the snapshot at every checkpoint.

Ages are on the runner's monotonic clock (given, with its sleep, to the constructor): a
wall-clock step (NTP, a resumed VM) moves no bound. A reload passes the old runner as
`previous`: the new one goes on with its schedule, listing, plan and health, so only items it
did not read before get first reads. The status pages see the runner through `status()`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from itertools import chain
from types import MappingProxyType
from typing import Final

from exporter.logs import LogThrottle, get_logger
from exporter.model import Failed, PartOutcome, Reading
from exporter.providers.base import (
    Listing,
    PartSamples,
    PollContext,
    Provider,
    ReadContext,
    ReadResult,
)
from exporter.selfmetrics import SelfMetrics
from exporter.status import reading_job
from exporter.store import SnapshotStore
from exporter.transport.iface import CallDropped, CallSkipped
from exporter.work.health import TargetHealth
from exporter.work.plan import Plan
from exporter.work.planner import Planner
from exporter.work.publisher import Publisher
from exporter.work.queue import Call, WorkQueue
from exporter.work.runner_status import RunnerStatus
from exporter.work.tiers import TIERS

log = get_logger(__name__)

# Staleness bound of a tier, in effective intervals, unless stale_after says otherwise.
STALE_INTERVALS: Final = 3.0
CHECKPOINTS_PER_ROUND: Final = 4
# Parts of a listing kept for the publish between two turns of the loop.
KEEP_BATCH: Final = 100
CHECKPOINT_MIN, CHECKPOINT_MAX = 1.0, 15.0


class TargetRunner:
    def __init__(
        self,
        provider: Provider,
        store: SnapshotStore,
        metrics: SelfMetrics,
        *,
        budget: float | None,
        workers: int,
        stale_after: float | None = None,
        max_series: int | None = None,
        owns_job: Callable[[str], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        previous: TargetRunner | None = None,
    ) -> None:
        self.provider, self.store, self.metrics = provider, store, metrics
        self.workers = workers
        self.owns_job = owns_job or (lambda job_id: True)
        self._clock, self._sleep = clock, sleep
        fast = provider.tiers.intervals["fast"]
        self._stale_intervals = stale_after / fast if stale_after else STALE_INTERVALS
        self.planner = Planner(self.labels, metrics, provider.tiers.intervals, budget, workers)
        self.queue = WorkQueue(provider.tiers, lambda: self.plan.effective, clock, sleep)
        self.health = TargetHealth(self.labels, metrics, provider.gate, provider.call_log, clock)
        self.out = Publisher(store, metrics, self.health, self.bounds, clock, max_series)
        # Set once every unit of the first round was read in full and published.
        self.ready = asyncio.Event()
        self._throttle = LogThrottle()
        if previous is not None:
            self._carry(previous)
        metrics.register_target(provider.provider, provider.target)
        self.planner.publish()

    def _carry(self, previous: TargetRunner) -> None:
        self.queue.carry(previous.queue)
        self.provider.gate.carry(previous.provider.gate)
        self.health.carry(previous.health)
        self.out.carry(previous.out)
        self.planner.carry(previous.planner)
        if previous.ready.is_set():
            self.ready.set()

    @property
    def plan(self) -> Plan:
        return self.planner.plan

    @property
    def labels(self) -> tuple[str, str]:
        return self.provider.provider, self.provider.target

    def bounds(self) -> dict[str, float]:
        """How long each tier's parts outlive their last read: a few of its intervals."""
        return {t: self._stale_intervals * s for t, s in self.plan.effective.items()}

    def status(self) -> RunnerStatus:
        """What the status pages show of the target, as it is now, immutable."""
        details = MappingProxyType({str(k): str(v) for k, v in self.provider.describe().items()})
        bounds, snapshot = MappingProxyType(self.bounds()), self.store.get(*self.labels)
        state, history, jobs = self.health.view()
        provider, target = self.labels
        plan, now = self.plan, self._clock()
        return RunnerStatus(
            provider, target, details, state, history, jobs, plan, bounds, snapshot, now
        )

    async def run(self) -> None:
        """Rounds until cancelled; the workers stop with it."""
        async with asyncio.TaskGroup() as workers:
            for _ in range(self.workers):
                workers.create_task(self._work())
            while True:
                started = self._clock()
                await self.round()
                await self._checkpoints_until(started + self.plan.effective["fast"])
                self.health.round_over()
                self.planner.lag(self.queue.lateness())

    async def round(self) -> Listing | None:
        """Read the job list, re-plan, hand the queue its units, publish. Never raises but on
        cancel; None when the list was not read (paused past the round, or a provider bug)."""
        started = self._clock()
        # A new round tries again after refused credentials: the listing is the probe.
        self.provider.gate.unblock()
        context = PollContext(
            deadline=started + self.plan.effective["fast"],
            started_at=time.time(),
            owns_job=self.owns_job,
        )
        listing: Listing | None = None
        try:
            listing = await self.provider.list_jobs(context)
        except (CallSkipped, CallDropped):
            pass
        except Exception:
            self._bug("listing failed")
            self.health.failed += 1
        self.metrics.poll_duration.labels(*self.labels).observe(self._clock() - started)
        self.health.listed = listing is not None and listing.listed
        if listing is not None:
            await self._take_listing(listing)
        await self.publish()
        return listing

    async def _take_listing(self, listing: Listing) -> None:
        self.health.failed += listing.failed_requests
        await _keep_all(self.out, listing.readings)
        if not listing.listed:
            return
        self.out.listed(listing.parts)
        if listing.left_out:
            self.out.left_out(listing.left_out)
        requests_per_read = {**dict.fromkeys(TIERS, 0), "fast": listing.requests}
        items = Counter(chain.from_iterable(unit.items for unit in listing.units))
        for item, count in items.items():
            requests_per_read[self.provider.tiers.tier_of(item)] += count
        self.planner.replan(requests_per_read)
        self.queue.sync(listing.units)
        for unit in listing.finals:
            self.queue.add_final(unit)

    async def _checkpoints_until(self, end: float) -> None:
        """Publish what came in at every checkpoint until `end`, and at `end`. Until ready,
        also as soon as the queue is warm: then publish, set `up`, be ready."""
        fast = self.plan.effective["fast"]
        every = min(CHECKPOINT_MAX, max(CHECKPOINT_MIN, fast / CHECKPOINTS_PER_ROUND))
        checkpoint = self._clock() + every
        while self._clock() < end:
            warming = None if self.ready.is_set() else self.queue.warmed
            wake = max(0.0, min(checkpoint, end) - self._clock())
            await _sooner(self._sleep(wake), warming)
            now = self._clock()
            if warming is not None and self.queue.warm():
                await self.publish()
                self.health.set_up()
                self.ready.set()
                checkpoint = self._clock() + every
            elif now >= checkpoint:
                if self.out.waiting:
                    await self.publish()
                checkpoint = now + every
        if self.out.waiting:
            await self.publish()

    async def _work(self) -> None:
        while True:
            call = await self.queue.take()
            try:
                sent = await self.read(call)
            except asyncio.CancelledError:
                # Stopped (a reload): the runner that carries the queue on makes it first.
                self.queue.again(call)
                raise
            finally:
                self.queue.done(call)
            if not sent:
                # Refused credentials: first in line once the next round's listing is accepted.
                self.queue.again(call)
                await self.provider.gate.unblocked()

    async def read(self, call: Call) -> bool:
        """Make one call and keep its outcome; False when the gate refused it unsent. A call
        dropped unsent (its turn came too late) is over: the queue has its next read."""
        context = ReadContext(self._clock() + self.plan.effective["fast"], time.time())
        token = reading_job.set(call.unit.job_id)  # whose attempts they are, for the pages
        try:
            result = await self.provider.read(call.unit, call.item, context)
        except CallSkipped:
            return False
        except CallDropped:
            return True
        except Exception:
            self._bug("read failed")
            result = ReadResult(call.unit.job_id, failed=True)
        finally:
            reading_job.reset(token)
        self._take_read(call, result)
        return True

    def _take_read(self, call: Call, result: ReadResult) -> None:
        if result.failed:
            self.health.failed += 1
        self.health.jobs.read(result.job_id, call.tier, ok=not result.failed)
        if result.gone:
            self.health.jobs.forget(result.job_id)
            # Deleted since the list named it: not exported until a list names it again.
            self.out.gone.add(result.job_id)
            self.queue.forget(call.unit.key)
            return
        for part, outcome in result.outcomes.items():
            self.out.keep(result.job_id, part, _reading(outcome, call.tier))

    async def publish(self) -> None:
        """Merge what came in since the last publish into the target's snapshot."""
        await self.out.publish()

    def _bug(self, what: str) -> None:
        """A provider bug must not stop the target: logged once a minute (the caller counts it)."""
        provider, target = self.labels
        self._throttle.log(what, log.exception, what, provider=provider, target=target)


async def _sooner(sleep: Awaitable[None], event: asyncio.Event | None) -> None:
    """Wait for `sleep`, or for `event` to be set if that comes first."""
    if event is None:
        await sleep
        return
    waits = {asyncio.ensure_future(sleep), asyncio.ensure_future(event.wait())}
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


async def _keep_all(out: Publisher, readings: Mapping[str, Mapping[str, PartSamples]]) -> None:
    """Hold a listing's readings for the next publish, letting the loop turn after every
    KEEP_BATCH parts: a thousand jobs' samples kept at once hold it longer than a scrape
    should wait."""
    kept = 0
    for job_id, parts in readings.items():
        for part, outcome in parts.items():
            out.keep(job_id, part, _reading(outcome, "fast"))
        kept += len(parts)
        if kept >= KEEP_BATCH:
            kept = 0
            await asyncio.sleep(0)


def _reading(outcome: PartSamples, tier: str) -> PartOutcome:
    return outcome if isinstance(outcome, Failed) else Reading(outcome, tier)
