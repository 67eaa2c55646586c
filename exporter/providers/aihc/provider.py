"""One AIHC target: discover its jobs, read the owned ones, say what the poll learnt.

A poll reads DescribeJobs whole (every configured queue, or the pool, page by page), then
makes the per-job calls of every owned job whose status is in `metric_statuses` at once (the
target's `ApiClient` keeps `max_concurrency` of them in flight): DescribeJob (pods), one
DescribeJobMetrics per metric type, and the job's events. Each call is one part of the job in
the `PollResult`, so a failed call keeps that part's last good samples (see
`exporter.model.merge`) and costs nothing else. A job is mapped as soon as its calls are in,
while other jobs' are still in flight; only its pods part waits for the end of the poll, as a
pod phase first seen in any job gets a series in every job's state set.

State kept between polls: the newest sample of every (job, metric type, pod) series, so each
DescribeJobMetrics asks only for the window since the newest sample already seen and a quiet
window keeps the newest value; the job statuses and pod phases seen so far (each gets a series
of its state set); and the parts each job exported last time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Final, TypeVar

from exporter.api import ApiError
from exporter.config import AihcTarget
from exporter.logs import get_logger
from exporter.metrics import KNOWN_JOB_STATUSES, KNOWN_POD_PHASES
from exporter.model import FAILED, Failed, PartOutcome, PollResult
from exporter.providers.aihc import mapping
from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import (
    DescribeJobMetricsReply,
    Job,
    JobDetail,
    JobEventsReply,
    MetricPoint,
    ReplyError,
)
from exporter.providers.base import PollContext
from exporter.providers.kit.numbers import timestamp
from exporter.providers.kit.states import Seen
from exporter.selfmetrics import SelfMetrics

log = get_logger(__name__)

T = TypeVar("T")

JOB_PART = "job"
PODS_PART = "pods"
EVENTS_PART = "events"
LAST_SAMPLE_PART = "last_sample"
METRIC_PART_PREFIX = "metric:"
# Bounds the paging loop whatever totalCount says.
MAX_PAGES = 1000


class _Gone:
    """A per-job call answered 404: the job was deleted after the list named it."""


GONE: Final = _Gone()


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
    # Every page call succeeded.
    complete: bool = True
    # The pages agreed with each other: no job can have slipped between two of them.
    consistent: bool = True


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


@dataclass(slots=True)
class _JobReplies:
    detail: JobDetail | Failed | _Gone = FAILED
    metrics: dict[str, DescribeJobMetricsReply | Failed | _Gone] = field(default_factory=dict)
    events: JobEventsReply | Failed | _Gone | None = None
    # Every part but the pods, mapped as soon as the job's calls are in.
    parts: dict[str, PartOutcome] = field(default_factory=dict)

    @property
    def gone(self) -> bool:
        outcomes = [self.detail, self.events, *self.metrics.values()]
        return any(isinstance(o, _Gone) for o in outcomes)


class _Poll:
    """The bookkeeping of one poll: failed calls, and whether auth failed (stop calling)."""

    def __init__(self, context: PollContext) -> None:
        self.context = context
        self.failed_requests = 0
        self.auth_failed = False
        self.malformed: dict[str, int] = {}


class AihcProvider:
    provider = "aihc"

    def __init__(
        self,
        target: AihcTarget,
        metrics: SelfMetrics,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = target
        self.target = target.name
        self.metrics = metrics
        self.client = AihcClient(target, metrics, clock=clock)
        self._metric_types = target.effective_metric_types
        self._metric_statuses = frozenset(target.metric_statuses)
        self._statuses = Seen(KNOWN_JOB_STATUSES)
        self._phases = Seen(KNOWN_POD_PHASES)
        self._jobs: dict[str, _JobState] = {}
        self._exported: dict[str, frozenset[str]] = {}
        self._auth_down = False
        self._listed_jobs = 0

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

    async def poll(self, context: PollContext) -> PollResult:
        run = _Poll(context)
        listing = await self._list(run)
        self._listed_jobs = len(listing.jobs)
        owned = {j: e for j, e in listing.jobs.items() if context.owns_job(j)}
        for entry in owned.values():
            self._statuses.add(entry.job.status)
        watched = {j: e for j, e in owned.items() if e.job.status in self._metric_statuses}
        replies = await asyncio.gather(*(self._read_job(run, e) for e in watched.values()))
        result = PollResult(listed=listing.complete)
        for job_id, entry in owned.items():
            samples = mapping.job_samples(
                entry.job, self._identity(entry), self._statuses.values, self._drop
            )
            result.put(job_id, JOB_PART, samples)
        gone = self._map_watched(result, watched, replies)
        if listing.complete and not listing.consistent:
            self._carry_unseen(result, gone)
        self._forget(listing, {j for j in watched if j not in gone})
        self._remember_exported(result, listing)
        result.failed_requests = run.failed_requests
        self._report(run)
        return result

    def _map_watched(
        self, result: PollResult, watched: dict[str, _Listed], replies: list[_JobReplies]
    ) -> set[str]:
        """Put the per-job parts of the watched jobs; return the jobs found deleted meanwhile."""
        for job_replies in replies:
            # A phase first seen in any job gets a series in every job's state set, this poll.
            if isinstance(job_replies.detail, JobDetail):
                for pod in job_replies.detail.pods or []:
                    self._phases.add(mapping.pod_phase(pod))
        gone: set[str] = set()
        for (job_id, entry), job_replies in zip(watched.items(), replies, strict=True):
            if job_replies.gone:
                # Deleted since the list named it: not exported, and not a failure.
                del result.jobs[job_id]
                gone.add(job_id)
            else:
                self._map_pods(result, job_id, self._identity(entry), job_replies.detail)
                for part, outcome in job_replies.parts.items():
                    result.put(job_id, part, outcome)
        return gone

    def _remember_exported(self, result: PollResult, listing: _Listing) -> None:
        exported = {j: frozenset(parts) for j, parts in result.jobs.items()}
        if not listing.complete:
            # merge() carries the jobs this poll could not see: so must the next carry-over.
            exported = {**self._exported, **exported}
        self._exported = exported

    def _identity(self, entry: _Listed) -> JobIdentity:
        return JobIdentity(self.config.resource_pool_id, entry.queue, entry.job.job_id)

    # -- discovery ---------------------------------------------------------------------------

    async def _list(self, run: _Poll) -> _Listing:
        listing = _Listing()
        queues: list[str | None] = list(self.config.queues) or [None]
        for found in await asyncio.gather(*(self._list_queue(run, q) for q in queues)):
            listing.complete &= found.complete
            listing.consistent &= found.consistent
            for job_id, entry in found.jobs.items():
                listing.jobs.setdefault(job_id, entry)
        return listing

    async def _list_queue(self, run: _Poll, queue: str | None) -> _Listing:
        """Page through one queue (or the pool) until totalCount, de-duplicating by jobId."""
        listing = _Listing()
        size = self.config.page_size
        totals: set[int | None] = set()
        for page in range(1, MAX_PAGES + 1):
            call = partial(self.client.describe_jobs, queue, page, size, run.context.deadline)
            reply = await self._call(run, "DescribeJobs", call)
            if isinstance(reply, Failed):
                listing.complete = False
                break
            jobs = reply.jobs or []
            totals.add(reply.total_count)
            for job in jobs:
                # A later page's copy is the newer one.
                listing.jobs[job.job_id] = _Listed(job, job.queue_id or queue or "")
            total = reply.total_count
            if len(jobs) < size:
                if total is not None and page * size < total:
                    listing.consistent = False
                break
            if total is not None and page * size >= total:
                break
        else:
            listing.consistent = False
        final_total = max((t for t in totals if t is not None), default=None)
        if len(totals) > 1 or (final_total is not None and len(listing.jobs) < final_total):
            listing.consistent = False
        return listing

    def _carry_unseen(self, result: PollResult, gone: set[str]) -> None:
        """Jobs that may have slipped between pages keep their last parts, under staleness."""
        for job_id, parts in self._exported.items():
            if job_id not in result.jobs and job_id not in gone:
                for part in parts:
                    result.put(job_id, part, FAILED)

    # -- per-job calls -----------------------------------------------------------------------

    async def _read_job(self, run: _Poll, entry: _Listed) -> _JobReplies:
        job_id, queue = entry.job.job_id, entry.queue
        deadline = run.context.deadline
        state = self._jobs.setdefault(job_id, _JobState())
        end = int(run.context.started_at)
        step = max(1, int(self.config.time_step))
        client = self.client
        metric_calls = [
            self._job_call(
                run,
                "DescribeJobMetrics",
                partial(
                    client.describe_job_metrics,
                    job_id,
                    queue,
                    metric_type,
                    self._window_start(state, metric_type, end, step),
                    end,
                    step,
                    deadline,
                ),
            )
            for metric_type in self._metric_types
        ]
        detail, metrics, events = await asyncio.gather(
            self._job_call(
                run, "DescribeJob", partial(client.describe_job, job_id, queue, deadline)
            ),
            asyncio.gather(*metric_calls),
            self._events(run, job_id),
        )
        replies = _JobReplies(detail, dict(zip(self._metric_types, metrics, strict=True)), events)
        if not replies.gone:
            # Now, while other jobs' calls are in flight, rather than all jobs at the end of
            # the poll with nothing in flight.
            self._map_parts(state, self._identity(entry), replies)
        return replies

    async def _events(self, run: _Poll, job_id: str) -> JobEventsReply | Failed | _Gone | None:
        if not self.config.events:
            return None
        call = partial(self.client.job_events, job_id, run.context.deadline)
        return await self._job_call(run, "DescribeJobEvents", call)

    def _window_start(self, state: _JobState, metric_type: str, end: int, step: int) -> int:
        """Just after the oldest "newest point" of the job's pods; a few steps back at first."""
        earliest = end - self.config.first_window_steps * step
        series = state.series.get(metric_type)
        if not series:
            return earliest
        since = min(s.seen_until for s in series.values()) + 1
        return int(max(earliest, min(since, end - step)))

    async def _job_call(
        self, run: _Poll, endpoint: str, make: Callable[[], Awaitable[T]]
    ) -> T | Failed | _Gone:
        """A per-job call; GONE when the job no longer exists (not a failure)."""
        try:
            return await self._call(run, endpoint, make, raise_not_found=True)
        except ApiError:
            return GONE

    async def _call(
        self,
        run: _Poll,
        endpoint: str,
        make: Callable[[], Awaitable[T]],
        *,
        raise_not_found: bool = False,
    ) -> T | Failed:
        """One API call; FAILED (and counted) when it fails or its reply has the wrong shape."""
        if run.auth_failed:
            # Credentials were refused this poll: the rest would be refused too.
            return FAILED
        try:
            return await make()
        except ApiError as exc:
            if raise_not_found and exc.code == "404":
                raise
            run.failed_requests += 1
            if exc.auth:
                run.auth_failed = True
            return FAILED
        except ReplyError as exc:
            run.failed_requests += 1
            run.malformed[endpoint] = run.malformed.get(endpoint, 0) + 1
            log.debug("malformed reply", target=self.target, endpoint=endpoint, error=str(exc))
            return FAILED

    # -- mapping -----------------------------------------------------------------------------

    def _map_pods(
        self, result: PollResult, job_id: str, who: JobIdentity, detail: JobDetail | Failed | _Gone
    ) -> None:
        """The pods part, once every phase the poll saw is known."""
        if not isinstance(detail, JobDetail):
            result.put(job_id, PODS_PART, FAILED)
            return
        pods = mapping.unique_pods(detail.pods or [])
        result.put(
            job_id, PODS_PART, mapping.pod_samples(pods, who, self._phases.values, self._drop)
        )

    def _map_parts(self, state: _JobState, who: JobIdentity, replies: _JobReplies) -> None:
        """Fold the job's replies into its state and map every part but the pods."""
        if isinstance(replies.detail, JobDetail):
            state.pods = {p.name for p in mapping.unique_pods(replies.detail.pods or [])}
        parts = replies.parts
        for metric_type, reply in replies.metrics.items():
            parts[metric_part(metric_type)] = self._map_metric(state, metric_type, who, reply)
        parts[LAST_SAMPLE_PART] = mapping.last_sample_samples(who, self._newest(state))
        if isinstance(replies.events, Failed | _Gone):
            parts[EVENTS_PART] = FAILED
        elif replies.events is not None:
            parts[EVENTS_PART] = mapping.event_samples(replies.events.events or [], who, self._drop)

    def _map_metric(
        self,
        state: _JobState,
        metric_type: str,
        who: JobIdentity,
        reply: DescribeJobMetricsReply | Failed | _Gone,
    ) -> PartOutcome:
        if not isinstance(reply, DescribeJobMetricsReply):
            return FAILED
        series = state.series.setdefault(metric_type, {})
        in_reply: set[str] = set()
        for pod_series in reply.metrics or []:
            pod = pod_series.pod_name
            in_reply.add(pod)
            current = series.setdefault(pod, _Series())
            self._absorb(metric_type, current, pod_series.metrics or [])
        if state.pods is not None:
            for pod in [p for p in series if p not in state.pods and p not in in_reply]:
                del series[pod]
        newest = {
            pod: (s.newest_at, s.value) for pod, s in series.items() if s.newest_at is not None
        }
        return mapping.resource_samples(metric_type, who, newest)

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

    # -- lifecycle ---------------------------------------------------------------------------

    def _forget(self, listing: _Listing, watched: set[str]) -> None:
        """Drop sample state of jobs that left metric_statuses or the list (when it is known)."""
        for job_id in list(self._jobs):
            if job_id in watched:
                continue
            if job_id in listing.jobs or (listing.complete and listing.consistent):
                del self._jobs[job_id]

    def _report(self, run: _Poll) -> None:
        if run.auth_failed != self._auth_down:
            self._auth_down = run.auth_failed
            if run.auth_failed:
                log.error(
                    "aihc credentials refused: target down until they are accepted",
                    target=self.target,
                )
            else:
                log.info("aihc credentials accepted again", target=self.target)
        if run.malformed:
            log.warning(
                "malformed aihc replies: those parts keep their last good data",
                target=self.target,
                endpoints=run.malformed,
            )
