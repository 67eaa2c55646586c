"""Paging that must make progress: a job list's pages are read only while they add to it.

A gateway that answers every page with the same jobs would otherwise be read up to the
1,000-page cap each poll (368 pages in 40 s at 10 requests/s, 1,000 calls a poll without a
budget), with `up` 1 and nothing logged. So a listing stops, and is then not trusted (its
target's last good jobs are carried under the staleness rule), when a page repeats an earlier
one, a page is empty before the total it announced, the total is more than `max_pages` pages can
hold, or the pages run past the first total's count by more than SLACK_PAGES (a total that keeps
growing). `Pages.check` says why; the caller counts it in
`training_exporter_discovery_errors_total` and logs it once per change (`StopLog`).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Final

from exporter.logs import OnChange, get_logger
from exporter.selfmetrics import SelfMetrics

log = get_logger(__name__)

# Pages beyond those the first page's total asked for: jobs created while paging.
SLACK_PAGES: Final = 2


class Pages:
    """The pages of one listing: `next_page()` until None, `check()` each page."""

    def __init__(self, page_size: int, max_pages: int) -> None:
        self._size = page_size
        self._max_pages = max_pages
        self._limit = max_pages
        self._page = 0
        self._seen: set[bytes] = set()
        self._first_total: int | None = None

    def next_page(self) -> int | None:
        if self._page >= self._limit:
            return None
        self._page += 1
        return self._page

    def check(self, ids: Sequence[str], total: int | None) -> str | None:
        """Why the page stops the listing, or None when it adds to it."""
        page, size = self._page, self._size
        if total is not None and total > self._max_pages * size:
            return f"total {total} is more than {self._max_pages} pages of {size} hold"
        if total is not None and self._first_total is None:
            self._first_total = total
            self._limit = min(self._max_pages, math.ceil(total / size) + SLACK_PAGES)
        if not ids:
            if total and (page - 1) * size < total:
                return f"page {page} is empty before the total {total}"
            return None
        joined = "\x00".join(ids).encode("utf-8", "surrogatepass")
        digest = hashlib.blake2b(joined, digest_size=16).digest()
        if digest in self._seen:
            return f"page {page} repeats an earlier page"
        self._seen.add(digest)
        if total is not None and page >= self._limit and page * size < total:
            return f"the total keeps growing: {total} after {page} pages"
        return None

    def finished(self, more: bool) -> str | None:
        """Why the listing, over with its last page full (`more`), is not whole; or None."""
        if more and self._page >= self._limit:
            return f"more than {self._page} pages"
        return None


class StopLog:
    """Counts a target's listings that stopped, and logs each collection once per change."""

    def __init__(self, provider: str, target: str, metrics: SelfMetrics) -> None:
        self.provider = provider
        self.target = target
        self._errors = metrics.discovery_errors.labels(provider, target)
        # Per collection: why its listing last stopped, None while it is whole.
        self._reason: OnChange[str | None] = OnChange(None)

    def stopped(self, collection: str, reason: str) -> None:
        self._errors.inc()
        if self._reason.changed(reason, collection):
            log.warning(
                "job list stopped: it made no progress; the last good jobs are kept",
                provider=self.provider,
                target=self.target,
                collection=collection or "all",
                reason=reason,
            )

    def whole(self, collection: str) -> None:
        if self._reason.changed(None, collection):
            log.info(
                "job list makes progress again",
                provider=self.provider,
                target=self.target,
                collection=collection or "all",
            )
