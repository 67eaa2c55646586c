"""One AIHC target: list its jobs each round, read each job's items when the runner asks.

`list_jobs()` reads DescribeJobs whole (`listing.JobLister`), keeps at most `max_jobs` of the
owned jobs (those already exported first, then running ones), and names for each job the parts
it has. The jobs whose status is in `metric_statuses` are units; their items are DescribeJob
(`pods`), one DescribeJobMetrics per metric type, and the events (`reads.JobReads`). A job that
leaves `metric_statuses` gets one final read of its pods and events (2 calls a job lifetime),
kept while it is listed, so a failed job's last pod phases, restart counts and JobFailed events
are there for alerts.

State kept between rounds: the watched jobs' metric series (`series.JobSeries`); the statuses
and phases seen so far (each gets a series of its state set); which jobs were exported,
watched and finished last round.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from exporter.metrics import KNOWN_JOB_STATUSES
from exporter.model import FAILED
from exporter.providers.aihc import mapping
from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.lifecycle import AihcLifecycle
from exporter.providers.aihc.listing import JobLister, Listed
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.reads import (
    EVENTS_PART,
    LAST_SAMPLE_PART,
    PODS_PART,
    JobReads,
    metric_part,
)
from exporter.providers.aihc.target import EVENTS, NAME, PODS, AihcTarget
from exporter.providers.base import (
    Listing,
    PollContext,
    ReadContext,
    ReadResult,
    Unit,
)
from exporter.providers.kit.folds import FoldLog
from exporter.providers.kit.states import Seen
from exporter.selfmetrics import SelfMetrics

if TYPE_CHECKING:
    from exporter.providers.base import TierPlan

JOB_PART = "job"
# A listed job's utilisation, run time and queue wait, which change at every listing: apart from
# its info and status (`JOB_PART`), which seldom change, so that part stays the object it was
# and is not packed, rendered or deflated again at each listing.
USAGE_PART = "usage"
LISTED_PARTS = frozenset({JOB_PART, USAGE_PART})
# Jobs placed between two turns of the event loop in a round's listing.
PLACE_BATCH = 25


class AihcProvider:
    provider = NAME

    def __init__(
        self,
        target: AihcTarget,
        metrics: SelfMetrics,
        tiers: TierPlan,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = target
        self.target = target.name
        self.metrics = metrics
        self.client = AihcClient(target, metrics, clock=clock)
        self.gate = self.client.api.gate
        self.call_log = self.client.api.call_log
        self._metric_types = target.effective_metric_types
        self._items = target.read_items()
        self.tiers = tiers
        self._metric_statuses = frozenset(target.metric_statuses)
        # Label values past their caps, logged at most once a minute for the target.
        self._folds = FoldLog(NAME, target.name)
        self._statuses = Seen(KNOWN_JOB_STATUSES, label="status", folds=self._folds)
        self._identities: dict[str, JobIdentity] = {}
        self._exported: dict[str, frozenset[str]] = {}
        self._finished: set[str] = set()
        self._listed_jobs = 0
        self.lister = JobLister(self.client, target, metrics)
        self.life = AihcLifecycle(target, self._final_items)
        self.reads = JobReads(self.client, target, metrics, self.life, self._drop, self._folds)
        self.events = self.reads.events
        metric_parts = (metric_part(t) for t in self._metric_types)
        self._watched_parts = frozenset(
            {*LISTED_PARTS, LAST_SAMPLE_PART, *metric_parts, *self._final_parts}
        )

    def describe(self) -> dict[str, str]:
        return {
            "endpoint": self.config.endpoint,
            "resource_pool": self.config.resource_pool_id,
            "queues": ", ".join(self.config.queues) or "all",
            "jobs": str(self._listed_jobs),
        }

    async def close(self) -> None:
        await self.client.close()

    def _drop(self, reason: str) -> None:
        self.metrics.drop(self.provider, reason)

    # -- the round's list --------------------------------------------------------------------

    async def list_jobs(self, context: PollContext) -> Listing:
        found = await self.lister.list(context)
        self._listed_jobs = len(found.jobs)
        out = Listing(listed=found.complete, requests=found.requests, failed_requests=found.failed)
        if not found.complete:
            return out
        owned = {j: e for j, e in found.jobs.items() if context.owns_job(j)}
        selected, out.left_out = self._select(owned)
        for entry in selected.values():
            self._statuses.add(entry.job.status)
        watched: set[str] = set()
        for count, (job_id, entry) in enumerate(selected.items(), 1):
            self._place(job_id, entry, out, watched, context.started_at)
            if count % PLACE_BATCH == 0:
                # Placing a thousand jobs at once holds the loop longer than a scrape should wait.
                await asyncio.sleep(0)
        if not found.consistent:
            # Jobs that may have slipped between pages keep their parts, not read this round.
            for job_id, parts in self._exported.items():
                if job_id not in out.parts and job_id in self._identities:
                    out.parts[job_id] = parts
                    out.readings[job_id] = dict.fromkeys(LISTED_PARTS, FAILED)
        self._exported = dict(out.parts)
        self.reads.watched = watched
        self._finished &= set(selected)
        if found.consistent:
            self.reads.keep(watched)
            self._identities = {j: self._identities[j] for j in out.parts}
            self.life.keep(out.parts)
        return out

    def _place(
        self, job_id: str, entry: Listed, out: Listing, watched: set[str], now: float
    ) -> None:
        """The job's list samples, parts and reads: watched, finished (one final read of pods
        and events: it was watched, or it failed and its class needs them), or listed only."""
        who = self._identity(entry)
        job = mapping.job_samples(entry.job, who, self._statuses.values, self._drop)
        life, waited = self.life.job_samples(entry.job, who, now)
        usage = mapping.job_usage_samples(entry.job, who, self._drop)
        out.readings[job_id] = {JOB_PART: (*job, *life), USAGE_PART: (*usage, *waited)}
        if entry.job.status in self._metric_statuses:
            watched.add(job_id)
            out.units.append(Unit(job_id, job_id, self._items))
            out.parts[job_id] = self._watched_parts
        elif (
            self.life.wants_final(job_id)
            or job_id in self.reads.watched
            or job_id in self._finished
        ):
            if job_id not in self._finished:
                out.finals.append(Unit(job_id, job_id, self._final_items))
            self._finished.add(job_id)
            out.parts[job_id] = frozenset({*LISTED_PARTS, *self._final_parts})
        else:
            out.parts[job_id] = LISTED_PARTS

    @property
    def _final_items(self) -> tuple[str, ...]:
        return tuple(i for i in (PODS, EVENTS) if i in self._items)

    @property
    def _final_parts(self) -> tuple[str, ...]:
        return (PODS_PART, *((EVENTS_PART,) if self.config.events else ()))

    def _select(self, owned: dict[str, Listed]) -> tuple[dict[str, Listed], int]:
        """At most max_jobs jobs: those already exported first, then watched, then the rest."""
        cap = self.config.max_jobs
        if len(owned) <= cap:
            return owned, 0

        def rank(job_id: str) -> int:
            if job_id in self._exported:
                return 0
            return 1 if owned[job_id].job.status in self._metric_statuses else 2

        keep = sorted(owned, key=rank)[:cap]
        return {j: owned[j] for j in keep}, len(owned) - cap

    def _identity(self, entry: Listed) -> JobIdentity:
        job_id = entry.job.job_id
        who = self._identities.get(job_id)
        if who is None or who.queue != entry.queue:
            who = JobIdentity(self.config.resource_pool_id, entry.queue, job_id)
            self._identities[job_id] = who
        return who

    # -- the runner's reads ------------------------------------------------------------------

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        who = self._identities.get(unit.job_id)
        if who is None:
            return ReadResult(unit.job_id)
        result = await self.reads.read(who, item, context)
        self.life.read_done(unit.job_id, item)
        return result
