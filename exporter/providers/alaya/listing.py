"""List discovery (`discovery: list`): the jobs of Alaya's job list.

`GET /api/osm/v1/training/instance/list?pageNo=N&pageSize=M`, signed with the access key
pair, is not in Alaya's published API reference: it was seen in a public client, so it is
opt-in. Each poll reads every page (`ceil(totalRows / list_page_size)` requests; the list
holds finished jobs too, and no server-side filter is known), keeps the records whose
status is in `list_statuses` (and whose `aidcId` is `aidc_id`, when set), and polls the pods
of those whose status is in `metric_statuses`.

Paging is bounded and guarded, because a list that shifts while it is read or a gateway that
answers every page alike would otherwise loop or export a wrong list: more than
`list_max_pages` pages, a `totalRows` past what those pages can hold, a page that repeats an
earlier one, or an empty page before `totalRows` is reached stop the listing. The poll is
then not listed (the last good jobs carry over), the reason is logged once per change, and
`training_exporter_discovery_errors_total` counts it, as it counts a failed request.

The list names no pods. A job that `jobs` or `jobs_file` names gets the pods named there;
any other gets `pod_pattern` over its `workerCount`, or no pods (job-level series only).
"""

from __future__ import annotations

from collections.abc import Sequence

from exporter.logs import OnChange, get_logger
from exporter.providers.alaya.client import (
    AccessKeys,
    AlayaClient,
    InvalidReply,
)
from exporter.providers.alaya.discovery import JobTarget, StaticJobs
from exporter.providers.alaya.jobsfile import MAX_PODS_PER_JOB
from exporter.providers.alaya.mapping import pattern_pods, worker_count
from exporter.providers.alaya.models import JobRecord, valid_items
from exporter.providers.alaya.target import NAME, AlayaTarget
from exporter.providers.base import PollContext
from exporter.providers.kit.numbers import INVALID_ITEM
from exporter.providers.kit.paging import Pages
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError

log = get_logger(__name__)


class ListingFailed(InvalidReply):
    """The pages read do not add up to one consistent list."""


class ListDiscovery:
    def __init__(
        self,
        target: AlayaTarget,
        client: AlayaClient,
        metrics: SelfMetrics,
        named: StaticJobs,
    ) -> None:
        self.target = target.name
        self._client = client
        self._keys = AccessKeys.of(target)
        self._named = named
        self._page_size = target.list_page_size
        self._max_pages = target.list_max_pages
        self._statuses = frozenset(s.casefold() for s in target.list_statuses)
        self._metric_statuses = frozenset(s.casefold() for s in target.metric_statuses)
        self._aidc_id = target.aidc_id
        self._pattern = target.pod_pattern
        self._metrics = metrics
        self._errors = metrics.discovery_errors.labels(NAME, target.name)
        # Why the list was last not read; None while it is.
        self._failing: OnChange[str | None] = OnChange(None)
        self._last: tuple[JobTarget, ...] = ()
        self._listed = 0

    async def jobs(self, context: PollContext) -> Sequence[JobTarget]:
        named = await self._named.named()
        try:
            records = await self._read_all(context.deadline)
        except (ApiError, InvalidReply) as exc:
            self._errors.inc()
            reason = str(exc)
            if self._failing.changed(reason):
                log.warning(
                    "alaya job list not read; the last good jobs are carried over",
                    target=self.target,
                    error=reason,
                )
            raise
        if self._failing.changed(None):
            log.info("alaya job list read again", target=self.target, jobs=len(records))
        self._listed = len(records)
        self._last = tuple(self._target_of(r, named) for r in records if self._wanted(r))
        return self._last

    async def _read_all(self, deadline: float) -> list[JobRecord]:
        """Every record of every page, each id once; ListingFailed when paging goes wrong."""
        pages = Pages(self._page_size, self._max_pages)
        records: dict[str, JobRecord] = {}
        read = 0
        more = True
        while more and (page_no := pages.next_page()) is not None:
            page = await self._client.job_list_page(self._keys, page_no, self._page_size, deadline)
            valid = list(valid_items(JobRecord, page.records))
            stop = pages.check([r.id if r is not None else "" for r in valid], page.total_rows)
            if stop is not None:
                raise ListingFailed("list", f"{stop} (list_max_pages, list_page_size)")
            for record in valid:
                if record is None:
                    self._metrics.drop(NAME, INVALID_ITEM)
                    continue
                # A job that moved pages while they were read: the later record is newer.
                records[record.id] = record
            read += len(page.records)
            more = bool(page.records) and read < page.total_rows
        stop = pages.finished(more)
        if stop is not None:
            raise ListingFailed("list", f"{stop} (list_max_pages)")
        return list(records.values())

    def _wanted(self, record: JobRecord) -> bool:
        if self._statuses and (record.status or "").casefold() not in self._statuses:
            return False
        return self._aidc_id is None or str(record.aidc_id) == self._aidc_id

    def _target_of(self, record: JobRecord, named: dict[str, tuple[str, ...]]) -> JobTarget:
        pods: tuple[str, ...] = ()
        polled = not self._metric_statuses or (
            (record.status or "").casefold() in self._metric_statuses
        )
        if polled and record.id in named:
            pods = named[record.id]
        elif polled and self._pattern:
            # A bad workerCount is counted once, by the job's own samples.
            workers = worker_count(record, _ignore)
            if workers is not None:
                pods = pattern_pods(self._pattern, record, min(workers, MAX_PODS_PER_JOB))
        return JobTarget(record.id, pods, record)

    def describe(self) -> dict[str, str]:
        return {
            "discovery": "list",
            "jobs": str(len(self._last)),
            "pods": str(sum(len(j.pods) for j in self._last)),
            "listed": str(self._listed),
            "list statuses": ", ".join(sorted(self._statuses)) or "all",
        }

    async def close(self) -> None:
        # The client is the provider's: it closes it.
        return None


def _ignore(reason: str) -> None:
    return None
