"""Paging that must make progress: a job list's pages are read only while they add to it.

Pages that repeated the same jobs were fetched until a 1,000-page cap: 368 pages in 40 s at
10 requests/s, 1,000 calls every poll without a budget, with `up` 1 and nothing logged. A list
stops, and is then not trusted (its target's last good jobs are carried under the staleness
rule), when a page repeats an earlier one, a page is empty before the total it announced, the
total keeps growing past a bound, or the pages reach MAX_PAGES. Each stop is counted in
`training_exporter_discovery_errors_total` and logged once per change of reason.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Final

from exporter.logs import get_logger
from exporter.selfmetrics import SelfMetrics

log = get_logger(__name__)

MAX_PAGES: Final = 1000
# Pages beyond those the first page's total asked for: jobs created while paging.
SLACK_PAGES: Final = 2


class PageGuard:
    """One per listed collection (a queue, a pool, a list endpoint) of a target."""

    def __init__(self, provider: str, target: str, metrics: SelfMetrics) -> None:
        self.provider = provider
        self.target = target
        self._metrics = metrics
        self._reason: dict[str, str | None] = {}

    def start(self, collection: str, page_size: int) -> Paging:
        return Paging(self, collection, page_size)

    def stopped(self, collection: str, reason: str, page: int) -> None:
        self._metrics.discovery_errors.labels(self.provider, self.target).inc()
        if self._reason.get(collection) != reason:
            self._reason[collection] = reason
            log.warning(
                "job list stopped: it made no progress; the last good jobs are kept",
                provider=self.provider,
                target=self.target,
                collection=collection or "all",
                reason=reason,
                page=page,
            )

    def finished(self, collection: str) -> None:
        if self._reason.get(collection):
            log.info(
                "job list makes progress again",
                provider=self.provider,
                target=self.target,
                collection=collection or "all",
            )
        self._reason[collection] = None


class Paging:
    """The pages of one listing: `next_page()` until None, `accept()` each page's ids."""

    def __init__(self, guard: PageGuard, collection: str, page_size: int) -> None:
        self._guard = guard
        self._collection = collection
        self._size = page_size
        self._page = 0
        self._seen: set[bytes] = set()
        self._first_total: int | None = None
        self._limit = MAX_PAGES

    def next_page(self) -> int | None:
        if self._page >= self._limit:
            return None
        self._page += 1
        return self._page

    def accept(self, ids: Sequence[str], total: int | None) -> bool:
        """Whether the page adds to the list; False stops it (counted and logged)."""
        if total is not None and self._first_total is None:
            self._first_total = total
            self._limit = min(MAX_PAGES, math.ceil(total / self._size) + SLACK_PAGES)
        reason = None
        if not ids and total and (self._page - 1) * self._size < total:
            reason = "empty page before totalCount"
        elif ids:
            joined = "\x00".join(ids).encode("utf-8", "surrogatepass")
            digest = hashlib.blake2b(joined, digest_size=16).digest()
            if digest in self._seen:
                reason = "page repeats an earlier one"
            self._seen.add(digest)
        limited = self._page >= self._limit and total is not None
        if reason is None and limited and self._page * self._size < (total or 0):
            reason = "totalCount keeps growing"
        if reason is not None:
            self._guard.stopped(self._collection, reason, self._page)
            return False
        return True

    def done(self, more: bool = False) -> bool:
        """The listing ended; `more`: its last page was full. False when it hit the page limit."""
        if more and self._page >= self._limit:
            self._guard.stopped(self._collection, "page limit reached", self._page)
            return False
        self._guard.finished(self._collection)
        return True
