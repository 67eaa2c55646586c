"""DescribeJobs read whole: every configured queue (or the pool), page by page.

Each queue is paged until its totalCount, de-duplicated by jobId (a later page's copy wins),
with `kit.paging.Pages` guarding against pages that make no progress. A listing is `complete`
when every page call succeeded and made progress, and `consistent` when its pages agreed with
each other, so that no job can have slipped between two of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.models import DescribeJobsReply, Job
from exporter.providers.aihc.target import NAME, AihcTarget
from exporter.providers.base import PollContext
from exporter.providers.kit.numbers import INVALID_ITEM
from exporter.providers.kit.paging import Pages, StopLog
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError

# Bounds the paging loop whatever totalCount says.
MAX_PAGES: Final = 1000


@dataclass(slots=True)
class Listed:
    job: Job
    # The queue to name in per-job calls and in the `queue` label.
    queue: str


@dataclass(slots=True)
class JobList:
    jobs: dict[str, Listed] = field(default_factory=dict)
    # Every page call succeeded and made progress.
    complete: bool = True
    # The pages agreed with each other: no job can have slipped between two of them.
    consistent: bool = True
    requests: int = 0
    failed: int = 0


@dataclass(slots=True)
class _QueuePages:
    """One queue's paging: its listing so far, the totals the pages announced, and the
    elements dropped for their shape."""

    queue: str | None
    pages: Pages
    found: JobList = field(default_factory=JobList)
    totals: set[int | None] = field(default_factory=set)
    skipped: int = 0


class JobLister:
    """Reads one target's DescribeJobs whole each round (`list`)."""

    def __init__(self, client: AihcClient, target: AihcTarget, metrics: SelfMetrics) -> None:
        self.client = client
        self.config = target
        self.metrics = metrics
        self._stops = StopLog(NAME, target.name, metrics)

    async def list(self, context: PollContext) -> JobList:
        listing = JobList()
        queues: list[str | None] = [*self.config.queues] or [None]
        for queue in queues:
            found = await self._list_queue(context, queue)
            listing.requests += found.requests
            listing.failed += found.failed
            listing.complete &= found.complete
            listing.consistent &= found.consistent
            for job_id, entry in found.jobs.items():
                listing.jobs.setdefault(job_id, entry)
            if not listing.complete:
                break
        return listing

    async def _list_queue(self, context: PollContext, queue: str | None) -> JobList:
        """Page through one queue (or the pool) until totalCount, de-duplicating by jobId."""
        size = self.config.page_size
        read = _QueuePages(queue, Pages(size, MAX_PAGES))
        more = True
        while more and (page := read.pages.next_page()) is not None:
            read.found.requests += 1
            try:
                reply = await self.client.describe_jobs(queue, page, size, context.deadline)
            except ApiError:
                read.found.failed += 1
                read.found.complete = False
                return read.found
            page_more = self._take_page(read, page, reply)
            if page_more is None:
                return read.found
            more = page_more
        return self._finish(read, more)

    def _take_page(self, read: _QueuePages, page: int, reply: DescribeJobsReply) -> bool | None:
        """Add one page's jobs: whether another page is due, None when the page stops the
        listing."""
        for reason, count in reply.dropped.items():
            self.metrics.drop(NAME, reason, count)
        size, found = self.config.page_size, read.found
        jobs = reply.jobs or []
        # Jobs dropped for their shape still fill the page: "" keeps its size for the checks.
        unusable = reply.dropped.get(INVALID_ITEM, 0)
        read.skipped += unusable
        total = reply.total_count
        read.totals.add(total)
        stop = read.pages.check([j.job_id for j in jobs] + [""] * unusable, total)
        if stop is not None:
            self._stops.stopped(read.queue or "", stop)
            found.complete = False
            return None
        for job in jobs:
            # A later page's copy is the newer one.
            found.jobs[job.job_id] = Listed(job, job.queue_id or read.queue or "")
        fetched = len(jobs) + unusable
        if fetched < size and total is not None and page * size < total:
            found.consistent = False
        return fetched >= size and (total is None or page * size < total)

    def _finish(self, read: _QueuePages, more: bool) -> JobList:
        """The queue's listing once its pages are over: whole, and consistent or not."""
        found = read.found
        stop = read.pages.finished(more)
        if stop is not None:
            self._stops.stopped(read.queue or "", stop)
            found.complete = False
            return found
        self._stops.whole(read.queue or "")
        final_total = max((t for t in read.totals if t is not None), default=None)
        if len(read.totals) > 1 or (final_total is not None and len(found.jobs) < final_total):
            found.consistent = False
        if read.skipped:
            # An unusable element may be a job already exported: it keeps its parts, as one
            # that slipped between pages does, until their staleness bound.
            found.consistent = False
        return found
