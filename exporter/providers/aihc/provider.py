"""One AIHC target: list its jobs each round, read each job's items when the runner asks.

`list_jobs()` reads DescribeJobs whole (every configured queue, or the pool, page by page, with a
guard against pages that make no progress), keeps at most `max_jobs` of the owned jobs (those
already exported first, then running ones), and names for each job the parts it has. The
jobs whose status is in `metric_statuses` are units; their items are DescribeJob (`pods`), one
DescribeJobMetrics per metric type, and the events. A job that leaves `metric_statuses` gets
one final read of its pods and events (2 calls a job lifetime), kept while it is listed, so a
failed job's last pod phases, restart counts and JobFailed events are there for alerts.

Only DescribeJob's 404 means the job was deleted after the list named it; a 404 on a metric
type or the events fails that part alone, unless one DescribeJob then answers 404 too.

State kept between rounds: the newest sample of every (job, metric type, pod) series, so each
DescribeJobMetrics asks only for the window since the newest sample already seen and a quiet
window keeps the newest value; the statuses and phases seen so far (each gets a series of its
state set); which jobs were exported, watched and finished last round.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Final

from exporter.logs import get_logger
from exporter.metrics import KNOWN_JOB_STATUSES, KNOWN_POD_PHASES
from exporter.model import FAILED, Sample
from exporter.providers.aihc import mapping
from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.events import EventReader
from exporter.providers.aihc.lifecycle import AihcLifecycle
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import DescribeJobMetricsReply, Job, MetricPoint
from exporter.providers.aihc.target import EVENTS, NAME, PODS, AihcTarget
from exporter.providers.base import (
    Listing,
    PollContext,
    ReadContext,
    ReadResult,
    Unit,
)
from exporter.providers.kit.decode import Tolerant
from exporter.providers.kit.numbers import INVALID_ITEM, timestamp
from exporter.providers.kit.paging import Pages, StopLog
from exporter.providers.kit.states import Seen
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError

if TYPE_CHECKING:
    from exporter.providers.base import TierPlan

log = get_logger(__name__)

JOB_PART = "job"
PODS_PART = "pods"
EVENTS_PART = "events"
LAST_SAMPLE_PART = "last_sample"
METRIC_PART_PREFIX = "metric:"
NOT_FOUND: Final = "404"
# Bounds the paging loop whatever totalCount says.
MAX_PAGES: Final = 1000


def metric_part(metric_type: str) -> str:
    return f"{METRIC_PART_PREFIX}{metric_type}"


@dataclass(slots=True)
class _Listed:
    job: Job
    # The queue to name in per-job calls and in the `queue` label.
    queue: str


@dataclass(slots=True)
class _Listing:
    jobs: dict[str, _Listed] = field(default_factory=dict)
    # Every page call succeeded and made progress.
    complete: bool = True
    # The pages agreed with each other: no job can have slipped between two of them.
    consistent: bool = True
    calls: int = 0
    failed: int = 0


@dataclass(slots=True)
class _Series:
    """One (job, metric type, pod) series: its newest valid sample and newest point seen."""

    newest_at: float | None = None
    value: float = 0.0
    seen_until: float = 0.0


@dataclass(slots=True)
class _JobState:
    # metric type -> pod -> series
    series: dict[str, dict[str, _Series]] = field(default_factory=dict)
    pods: set[str] | None = None
    # pod -> its newest point of any metric type: kept as points come, not walked for
    # (22 types x 8 pods: 53 of the 134 us a read's mapping took).
    newest: dict[str, float] = field(default_factory=dict)


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
        self.calls = self.client.api.calls
        self._metric_types = target.effective_metric_types
        self._items = target.read_items()
        self.tiers = tiers
        self._metric_statuses = frozenset(target.metric_statuses)
        self._statuses = Seen(KNOWN_JOB_STATUSES)
        self._phases = Seen(KNOWN_POD_PHASES)
        self._jobs: dict[str, _JobState] = {}
        self._identities: dict[str, JobIdentity] = {}
        self._exported: dict[str, frozenset[str]] = {}
        self._watched: set[str] = set()
        self._finished: set[str] = set()
        self._listed_jobs = 0
        self._stops = StopLog(NAME, target.name, metrics)
        self.life = AihcLifecycle(target, self._final_items)
        self.events = EventReader(self.client, metrics, target.name, self.life)

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

    def _count_dropped(self, reply: Tolerant | DescribeJobMetricsReply) -> None:
        """Count the list elements a reply lost to their shape (see `kit.decode.each`)."""
        for reason, count in reply.dropped.items():
            self.metrics.drop(self.provider, reason, count)

    # -- the round's list --------------------------------------------------------------------

    async def list_jobs(self, context: PollContext) -> Listing:
        found = await self._list(context)
        self._listed_jobs = len(found.jobs)
        out = Listing(listed=found.complete, calls=found.calls, failed_requests=found.failed)
        if not found.complete:
            return out
        owned = {j: e for j, e in found.jobs.items() if context.owns_job(j)}
        selected, out.left_out = self._select(owned)
        for entry in selected.values():
            self._statuses.add(entry.job.status)
        watched: set[str] = set()
        for job_id, entry in selected.items():
            self._place(job_id, entry, out, watched, context.started_at)
        if not found.consistent:
            # Jobs that may have slipped between pages keep their parts, not read this round.
            for job_id, parts in self._exported.items():
                if job_id not in out.parts and job_id in self._identities:
                    out.parts[job_id] = parts
                    out.readings[job_id] = {JOB_PART: FAILED}
        self._exported = dict(out.parts)
        self._watched = watched
        self._finished &= set(selected)
        if found.consistent:
            for job_id in [j for j in self._jobs if j not in watched]:
                del self._jobs[job_id]
            self._identities = {j: self._identities[j] for j in out.parts}
            self.life.keep(out.parts)
            self.events.keep(out.parts)
        return out

    def _place(
        self, job_id: str, entry: _Listed, out: Listing, watched: set[str], now: float
    ) -> None:
        """The job's list samples, parts and reads: watched, finished (one final read of pods
        and events: it was watched, or it failed and its class needs them), or listed only."""
        who = self._identity(entry)
        job = mapping.job_samples(entry.job, who, self._statuses.values, self._drop)
        out.readings[job_id] = {JOB_PART: (*job, *self.life.job_samples(entry.job, who, now))}
        if entry.job.status in self._metric_statuses:
            watched.add(job_id)
            out.units.append(Unit(job_id, job_id, self._items))
            out.parts[job_id] = self._watched_parts
        elif self.life.wants_final(job_id) or job_id in self._watched | self._finished:
            if job_id not in self._finished:
                out.finals.append(Unit(job_id, job_id, self._final_items))
            self._finished.add(job_id)
            out.parts[job_id] = frozenset({JOB_PART, *self._final_parts})
        else:
            out.parts[job_id] = frozenset({JOB_PART})

    @property
    def _watched_parts(self) -> frozenset[str]:
        metric_parts = (metric_part(t) for t in self._metric_types)
        return frozenset({JOB_PART, LAST_SAMPLE_PART, *metric_parts, *self._final_parts})

    @property
    def _final_items(self) -> tuple[str, ...]:
        return tuple(i for i in (PODS, EVENTS) if i in self._items)

    @property
    def _final_parts(self) -> tuple[str, ...]:
        return (PODS_PART, *((EVENTS_PART,) if self.config.events else ()))

    def _select(self, owned: dict[str, _Listed]) -> tuple[dict[str, _Listed], int]:
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

    def _identity(self, entry: _Listed) -> JobIdentity:
        job_id = entry.job.job_id
        who = self._identities.get(job_id)
        if who is None or who.queue != entry.queue:
            who = JobIdentity(self.config.resource_pool_id, entry.queue, job_id)
            self._identities[job_id] = who
        return who

    async def _list(self, context: PollContext) -> _Listing:
        listing = _Listing()
        queues: list[str | None] = [*self.config.queues] or [None]
        for queue in queues:
            found = await self._list_queue(context, queue)
            listing.calls += found.calls
            listing.failed += found.failed
            listing.complete &= found.complete
            listing.consistent &= found.consistent
            for job_id, entry in found.jobs.items():
                listing.jobs.setdefault(job_id, entry)
            if not listing.complete:
                break
        return listing

    async def _list_queue(self, context: PollContext, queue: str | None) -> _Listing:
        """Page through one queue (or the pool) until totalCount, de-duplicating by jobId."""
        listing = _Listing()
        size = self.config.page_size
        pages = Pages(size, MAX_PAGES)
        totals: set[int | None] = set()
        skipped = 0
        more = True
        while more and (page := pages.next_page()) is not None:
            call = partial(self.client.describe_jobs, queue, page, size, context.deadline)
            listing.calls += 1
            try:
                reply = await call()
            except ApiError:
                listing.failed += 1
                listing.complete = False
                return listing
            self._count_dropped(reply)
            jobs = reply.jobs or []
            # Jobs dropped for their shape still fill the page: "" keeps its size for the checks.
            unusable = reply.dropped.get(INVALID_ITEM, 0)
            skipped += unusable
            total = reply.total_count
            totals.add(total)
            stop = pages.check([j.job_id for j in jobs] + [""] * unusable, total)
            if stop is not None:
                self._stops.stopped(queue or "", stop)
                listing.complete = False
                return listing
            for job in jobs:
                # A later page's copy is the newer one.
                listing.jobs[job.job_id] = _Listed(job, job.queue_id or queue or "")
            fetched = len(jobs) + unusable
            more = fetched >= size and (total is None or page * size < total)
            if fetched < size and total is not None and page * size < total:
                listing.consistent = False
        stop = pages.finished(more)
        if stop is not None:
            self._stops.stopped(queue or "", stop)
            listing.complete = False
            return listing
        self._stops.whole(queue or "")
        final_total = max((t for t in totals if t is not None), default=None)
        if len(totals) > 1 or (final_total is not None and len(listing.jobs) < final_total):
            listing.consistent = False
        if skipped:
            # An unusable element may be a job already exported: it keeps its parts, as one
            # that slipped between pages does, until their staleness bound.
            listing.consistent = False
        return listing

    # -- the runner's reads ------------------------------------------------------------------

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        job_id = unit.job_id
        who = self._identities.get(job_id)
        result = ReadResult(job_id)
        if who is None:
            return result
        try:
            if item == PODS:
                await self._read_pods(who, result, context)
            elif item == EVENTS:
                result.outcomes[EVENTS_PART] = await self.events.read(who, context)
            else:
                await self._read_metric(who, item, result, context)
        except ApiError as exc:
            if exc.code == NOT_FOUND and (item == PODS or await self._deleted(who, context)):
                # Deleted since the list named it: gone, and not a failure.
                result.gone = True
            else:
                result.failed = True
                result.outcomes = dict.fromkeys(self._parts_of(item), FAILED)
        self.life.read_done(job_id, item)
        return result

    async def _deleted(self, who: JobIdentity, context: ReadContext) -> bool:
        """Whether DescribeJob says the job is gone: only its 404 means that. A 404 on a
        metric type or the events is confirmed with this one call before the job is dropped."""
        try:
            await self.client.describe_job(who.job_id, who.queue, context.deadline)
        except ApiError as exc:
            return exc.code == NOT_FOUND
        return False

    def _parts_of(self, item: str) -> tuple[str, ...]:
        if item == PODS:
            return (PODS_PART,)
        if item == EVENTS:
            return (EVENTS_PART,)
        return (metric_part(item),)

    async def _read_pods(self, who: JobIdentity, result: ReadResult, context: ReadContext) -> None:
        detail = await self.client.describe_job(who.job_id, who.queue, context.deadline)
        self._count_dropped(detail)
        restarting = self.life.detail(who, detail, context.now)
        pods = mapping.unique_pods(detail.pods or [])
        for pod in pods:
            self._phases.add(mapping.pod_phase(pod))
        if who.job_id in self._watched:
            self._jobs.setdefault(who.job_id, _JobState()).pods = {p.name for p in pods}
        samples = mapping.pod_samples(pods, who, self._phases.values, self._drop)
        result.outcomes[PODS_PART] = (*samples, *restarting)

    async def _read_metric(
        self, who: JobIdentity, metric_type: str, result: ReadResult, context: ReadContext
    ) -> None:
        state = self._jobs.setdefault(who.job_id, _JobState())
        end = int(context.now)
        step = max(1, int(self.config.time_step))
        start = self._window_start(state, metric_type, end, step)
        reply = await self.client.describe_job_metrics(
            who.job_id, who.queue, metric_type, start, end, step, context.deadline
        )
        self._count_dropped(reply)
        result.outcomes[metric_part(metric_type)] = self._map_metric(state, metric_type, who, reply)
        result.outcomes[LAST_SAMPLE_PART] = mapping.last_sample_samples(who, state.newest)

    def _window_start(self, state: _JobState, metric_type: str, end: int, step: int) -> int:
        """Just after the oldest "newest point" of the job's pods; a few steps back at first."""
        earliest = end - self.config.first_window_steps * step
        series = state.series.get(metric_type)
        if not series:
            return earliest
        since = min(s.seen_until for s in series.values()) + 1
        return int(max(earliest, min(since, end - step)))

    def _map_metric(
        self,
        state: _JobState,
        metric_type: str,
        who: JobIdentity,
        reply: DescribeJobMetricsReply,
    ) -> tuple[Sample, ...]:
        series = state.series.setdefault(metric_type, {})
        in_reply: set[str] = set()
        newest = state.newest
        for pod_series in reply.metrics:
            pod = pod_series.pod_name
            in_reply.add(pod)
            current = series.setdefault(pod, _Series())
            self._absorb(metric_type, current, pod_series.metrics)
            if current.newest_at is not None and current.newest_at > newest.get(pod, 0.0):
                newest[pod] = current.newest_at
        if state.pods is not None:
            gone = [p for p in series if p not in state.pods and p not in in_reply]
            for pod in gone:
                del series[pod]
            if gone:
                state.newest = self._newest(state)
        values = {
            pod: (s.newest_at, s.value) for pod, s in series.items() if s.newest_at is not None
        }
        return mapping.resource_samples(metric_type, who, values)

    def _absorb(self, metric_type: str, series: _Series, points: Iterable[MetricPoint]) -> None:
        """Fold a pod's points into its series: only points newer than any seen count."""
        seen_until = series.seen_until
        for point in points:
            at = timestamp(point.time, self._drop)
            if at is None:
                continue
            if at <= seen_until:
                continue
            series.seen_until = max(series.seen_until, at)
            value = mapping.resource_number(
                metric_type, point.value, self.config.usage_unit, self._drop
            )
            if value is None:
                continue
            if series.newest_at is None or at >= series.newest_at:
                series.newest_at = at
                series.value = value

    @staticmethod
    def _newest(state: _JobState) -> dict[str, float]:
        newest: dict[str, float] = {}
        for by_pod in state.series.values():
            for pod, series in by_pod.items():
                if series.newest_at is not None:
                    newest[pod] = max(series.newest_at, newest.get(pod, series.newest_at))
        return newest
