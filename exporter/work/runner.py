"""One target's runner: rounds of job listing, a paced work queue, and snapshot publishing.

A round runs every effective fast-tier interval: it reads the job list and, when that
succeeded, re-plans the tiers for the counts it found, tells the queue which units to read,
and publishes. A listing that failed changes nothing but `up`: known jobs keep their schedule
and parts, the plan its last good counts. Meanwhile `workers` tasks take due calls from the
queue, their outcomes merged into the snapshot at every checkpoint.

Ages are on the monotonic clock: a wall-clock step (NTP, a resumed VM) moves no bound.
A reload passes the old runner as `previous`: the new one goes on with its schedule, listing
and plan, so only items it did not read before get first reads.

`up` is 1 when the round's listing and every call that ended since the previous round
succeeded, and the target is neither paused (Retry-After) nor refused (credentials).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Final

from exporter.logs import LogThrottle, OnChange, get_logger
from exporter.model import Failed, PartOutcome, Reading, Update, merge
from exporter.providers.base import (
    Listing,
    PartSamples,
    PollContext,
    Provider,
    ReadContext,
    ReadResult,
)
from exporter.selfmetrics import SelfMetrics
from exporter.status import Health, JobTrack, reading
from exporter.store import SnapshotStore, share_labels
from exporter.transport.iface import CallDropped, CallSkipped
from exporter.work.facts import facts_of
from exporter.work.plan import Plan, make_plan
from exporter.work.queue import Call, WorkQueue
from exporter.work.tiers import TIERS

log = get_logger(__name__)

# Staleness bound of a tier, in effective intervals, unless stale_after says otherwise.
STALE_INTERVALS: Final = 3.0
CHECKPOINTS_PER_ROUND: Final = 4
CHECKPOINT_MIN, CHECKPOINT_MAX = 1.0, 15.0
READY_CHECK: Final = 0.05
# A plan is logged again when an effective interval moved by more than this fraction.
PLAN_LOG_CHANGE: Final = 0.1


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
        previous: TargetRunner | None = None,
    ) -> None:
        self.provider = provider
        self.store = store
        self.metrics = metrics
        self.budget = budget
        self.workers = workers
        self.max_series = max_series
        self.owns_job = owns_job or (lambda job_id: True)
        self._clock = clock
        fast = provider.tiers.intervals["fast"]
        self._stale_intervals = stale_after / fast if stale_after else STALE_INTERVALS
        self.plan: Plan = self._plan(dict.fromkeys(TIERS, 0))
        self.queue = WorkQueue(provider.tiers, lambda: self.plan.effective, clock)
        # Set once every unit of the first round was read in full and published.
        self.ready = asyncio.Event()
        # The last good listing's jobs and their parts; None until there is one.
        self._parts: dict[str, frozenset[str]] | None = None
        self._listed = True
        self._pending = Update()
        self._gone: set[str] = set()
        self._failed = 0
        self._logged_plan: Plan | None = None
        self._behind = OnChange(False)
        self._warned_limit = False
        self._throttle = LogThrottle()
        self._publishing = asyncio.Lock()
        # The target's state and since when, for its status pages (exporter.status).
        self.health = Health()
        # Each listed job's reads, for the jobs page.
        self.job_reads = JobTrack()
        if previous is not None:
            self._carry(previous)
        metrics.register_target(provider.provider, provider.target)
        self._plan_metrics()

    def _carry(self, previous: TargetRunner) -> None:
        self.queue.carry(previous.queue)
        self.provider.gate.carry(previous.provider.gate)
        self.provider.calls.carry(previous.provider.calls)
        self.health, self.job_reads = previous.health, previous.job_reads
        self._parts = previous._parts
        self._pending = previous._pending
        self.plan = self._plan({t: previous.plan.calls.get(t, 0) for t in TIERS})
        if previous.ready.is_set():
            self.ready.set()

    def _plan(self, calls: Mapping[str, int]) -> Plan:
        return make_plan(calls, self.provider.tiers.intervals, self.budget, self.workers)

    @property
    def labels(self) -> tuple[str, str]:
        return self.provider.provider, self.provider.target

    def bounds(self) -> dict[str, float]:
        """How long each tier's parts outlive their last read: a few of its intervals."""
        return {t: self._stale_intervals * s for t, s in self.plan.effective.items()}

    # -- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Rounds until cancelled; the workers stop with it."""
        async with asyncio.TaskGroup() as workers:
            for _ in range(self.workers):
                workers.create_task(self._work())
            while True:
                started = self._clock()
                await self.round()
                await self._checkpoints_until(started + self.plan.effective["fast"])
                self._account_round()

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
            self._failed += 1
        self.metrics.poll_duration.labels(*self.labels).observe(self._clock() - started)
        self._listed = listing is not None and listing.listed
        if listing is not None:
            self._take_listing(listing)
        await self.publish()
        return listing

    def _take_listing(self, listing: Listing) -> None:
        self._failed += listing.failed_requests
        for job_id, parts in listing.readings.items():
            for part, outcome in parts.items():
                self._keep(job_id, part, _reading(outcome, "fast"))
        if not listing.listed:
            return
        self._parts = dict(listing.parts)
        self.job_reads.keep(self._parts)
        self._gone.clear()
        if listing.left_out:
            self._left_out(listing.left_out)
        calls = {**dict.fromkeys(TIERS, 0), "fast": listing.calls}
        for unit in listing.units:
            for item in unit.items:
                calls[self.provider.tiers.tier_of(item)] += 1
        self.plan = self._plan(calls)
        self._plan_metrics()
        self._log_plan()
        self.queue.sync(listing.units)
        for unit in listing.finals:
            self.queue.add_final(unit)

    async def _checkpoints_until(self, end: float) -> None:
        """Publish what came in at every checkpoint until `end`, and at `end`. Until ready, also
        look every READY_CHECK whether the queue is warm: then publish, set `up`, be ready."""
        fast = self.plan.effective["fast"]
        every = min(CHECKPOINT_MAX, max(CHECKPOINT_MIN, fast / CHECKPOINTS_PER_ROUND))
        checkpoint = self._clock() + every
        while (now := self._clock()) < end:
            wake = checkpoint if self.ready.is_set() else min(checkpoint, now + READY_CHECK)
            await asyncio.sleep(max(0.0, min(wake, end) - now))
            now = self._clock()
            if not self.ready.is_set() and self.queue.warm():
                await self.publish()
                self._set_up()
                self.ready.set()
                checkpoint = self._clock() + every
            elif now >= checkpoint:
                if self._pending.outcomes or self._gone:
                    await self.publish()
                checkpoint = now + every
        if self._pending.outcomes or self._gone:
            await self.publish()

    async def _work(self) -> None:
        while True:
            call = await self.queue.take()
            try:
                sent = await self._read(call)
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

    async def _read(self, call: Call) -> bool:
        """Make one call and keep its outcome; False when the gate refused it unsent. A call
        dropped unsent (its turn came too late) is over: the queue has its next read."""
        context = ReadContext(deadline=self._clock() + self.plan.effective["fast"], now=time.time())
        try:
            with reading(call.unit.job_id):
                result = await self.provider.read(call.unit, call.item, context)
        except CallSkipped:
            return False
        except CallDropped:
            return True
        except Exception:
            self._bug("read failed")
            result = ReadResult(call.unit.job_id, failed=True)
        self._take_read(call, result)
        return True

    def _take_read(self, call: Call, result: ReadResult) -> None:
        if result.failed:
            self._failed += 1
        self.job_reads.read(result.job_id, call.tier, ok=not result.failed)
        if result.gone:
            self.job_reads.forget(result.job_id)
            # Deleted since the list named it: not exported until a list names it again.
            self._gone.add(result.job_id)
            self.queue.forget(call.unit.key)
            return
        for part, outcome in result.outcomes.items():
            self._keep(result.job_id, part, _reading(outcome, call.tier))

    def _keep(self, job_id: str, part: str, outcome: PartOutcome) -> None:
        """Hold an outcome for the next publish, and what it says of its job for the pages."""
        self._pending.put(job_id, part, outcome)
        if isinstance(outcome, Reading):
            self.job_reads.saw(job_id, part, facts_of(outcome.samples))

    # -- publishing --------------------------------------------------------------------------

    async def publish(self) -> None:
        """Merge what came in since the last publish into the target's snapshot. The merge and
        label sharing run in threads: at tens of thousands of series they would hold the loop
        long enough to bunch the calls paced behind them."""
        async with self._publishing:
            update, self._pending = self._pending, Update()
            parts = self._parts
            if parts is not None and self._gone:
                parts = {j: p for j, p in parts.items() if j not in self._gone}
            update.parts = parts
            previous = self.store.get(*self.labels)
            outcome = await asyncio.to_thread(
                merge, previous, update, self._clock(), self.bounds(), self.max_series
            )
            snapshot = await asyncio.to_thread(share_labels, outcome.snapshot, previous)
            self.store.swap(snapshot, shared=True)
        provider, target = self.labels
        self.metrics.series.labels(provider).set(
            self.store.view().series_by_provider().get(provider, 0)
        )
        self.metrics.stale_parts.labels(provider, target).set(outcome.stale_parts)
        if not self._ok():
            self._set_up()  # down at once; up again only after a round without failures
        if outcome.jobs_left_out:
            self._left_out(len(outcome.jobs_left_out), by="max_series")

    def _ok(self) -> bool:
        return self._listed and self._failed == 0 and self.provider.gate.open

    def _set_up(self) -> None:
        """`up`, and the target's health for its status pages, as the round stands."""
        ok, gate, now = self._ok(), self.provider.gate, time.time()
        paused = gate.paused
        self.metrics.up.labels(*self.labels).set(1 if ok else 0)
        self.health.paused_until = now + gate.paused_until - time.monotonic() if paused else None
        if ok:
            self.metrics.last_success.labels(*self.labels).set(now)
            self.health.last_good_round = now
        state = "up" if ok else "refused" if gate.blocked else "paused" if paused else "down"
        self.health.set(state, now)

    def _account_round(self) -> None:
        provider, target = self.labels
        self._set_up()
        self._failed = 0
        lag = self.queue.lateness()
        behind = lag > self.plan.effective["fast"]
        if behind:
            self.metrics.poll_overruns.labels(provider, target).inc()
        if self._behind.changed(behind):
            emit = log.warning if behind else log.info
            emit(
                "calls are behind their tiers by more than a round"
                if behind
                else "calls caught up with their tiers",
                provider=provider,
                target=target,
                lag_seconds=round(lag, 1),
                **self.plan.describe(),
            )

    def _left_out(self, jobs: int, by: str = "max_jobs") -> None:
        provider, target = self.labels
        self.metrics.jobs_left_out.labels(provider, target).inc(jobs)
        if not self._warned_limit:
            self._warned_limit = True
            log.warning(f"{by} reached: jobs left out", provider=provider, target=target, jobs=jobs)

    def _plan_metrics(self) -> None:
        provider, target = self.labels
        self.metrics.budget_required.labels(provider, target).set(self.plan.required)
        if self.budget is not None:
            self.metrics.budget.labels(provider, target).set(self.budget)
        for tier, seconds in self.plan.effective.items():
            self.metrics.tier_interval.labels(provider, target, tier).set(seconds)

    def _log_plan(self) -> None:
        """Once when the plan needs more than the budget, again when an effective interval
        moves by more than PLAN_LOG_CHANGE, and once when it fits again."""
        logged, plan = self._logged_plan, self.plan
        if logged is None:
            moved = plan.exceeds
        else:
            moved = not plan.exceeds or any(
                abs(plan.effective[t] - s) > PLAN_LOG_CHANGE * s
                for t, s in logged.effective.items()
            )
        if not moved:
            return
        self._logged_plan = plan if plan.exceeds else None
        provider, target = self.labels
        if plan.exceeds:
            log.warning(
                "plan needs more requests than the budget: slower tiers stretched",
                provider=provider,
                target=target,
                **plan.describe(),
            )
        else:
            log.info("plan fits the budget again", provider=provider, target=target)

    def _bug(self, what: str) -> None:
        """A provider bug must not stop the target: logged once a minute (the caller counts it)."""
        provider, target = self.labels
        self._throttle.log(what, log.exception, what, provider=provider, target=target)


def _reading(outcome: PartSamples, tier: str) -> PartOutcome:
    return outcome if isinstance(outcome, Failed) else Reading(outcome, tier)
