"""A target's outcomes on their way to its snapshot: held as they come in, merged into the
store's snapshot at each publish, with the jobs and parts of the last good listing (less the
jobs deleted since) as what the snapshot holds.

The merge and label sharing run in threads: at tens of thousands of series they would hold
the loop long enough to bunch the calls paced behind them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from exporter.logs import get_logger
from exporter.model import PartOutcome, Reading, Update, merge
from exporter.selfmetrics import SelfMetrics
from exporter.store import SnapshotStore, share_labels
from exporter.work.facts import facts_of
from exporter.work.health import TargetHealth

log = get_logger(__name__)


class Publisher:
    def __init__(
        self,
        store: SnapshotStore,
        metrics: SelfMetrics,
        health: TargetHealth,
        bounds: Callable[[], Mapping[str, float]],
        clock: Callable[[], float],
        max_series: int | None = None,
    ) -> None:
        self.store, self.metrics, self.health = store, metrics, health
        self.labels = health.labels
        self.bounds, self.clock, self.max_series = bounds, clock, max_series
        # The last good listing's jobs and their parts; None until there is one.
        self.parts: dict[str, frozenset[str]] | None = None
        self.pending = Update()
        # Jobs deleted since the listing named them: not exported until one names them again.
        self.gone: set[str] = set()
        self._warned_limit = False
        self._lock = asyncio.Lock()

    def carry(self, previous: Publisher) -> None:
        self.parts, self.pending = previous.parts, previous.pending

    @property
    def waiting(self) -> bool:
        """Something came in since the last publish."""
        return bool(self.pending.outcomes or self.gone)

    def listed(self, parts: Mapping[str, frozenset[str]]) -> None:
        """A listing succeeded: its jobs and parts are what the snapshot holds from now on."""
        self.parts = dict(parts)
        self.health.jobs.keep(self.parts)
        self.gone.clear()

    def keep(self, job_id: str, part: str, outcome: PartOutcome) -> None:
        """Hold an outcome for the next publish, and what it says of its job for the pages."""
        self.pending.put(job_id, part, outcome)
        if isinstance(outcome, Reading):
            self.health.jobs.saw(job_id, part, facts_of(outcome.samples))

    async def publish(self) -> None:
        """Merge what came in since the last publish into the target's snapshot."""
        async with self._lock:
            update, self.pending = self.pending, Update()
            parts = self.parts
            if parts is not None and self.gone:
                parts = {j: p for j, p in parts.items() if j not in self.gone}
            update.parts = parts
            previous = self.store.get(*self.labels)
            outcome = await asyncio.to_thread(
                merge, previous, update, self.clock(), self.bounds(), self.max_series
            )
            snapshot = await asyncio.to_thread(share_labels, outcome.snapshot, previous)
            self.store.swap(snapshot, shared=True)
        provider, target = self.labels
        self.metrics.series.labels(provider).set(
            self.store.view().series_by_provider().get(provider, 0)
        )
        self.metrics.stale_parts.labels(provider, target).set(outcome.stale_parts)
        if not self.health.ok:
            self.health.set_up()  # down at once; up again only after a round without failures
        if outcome.jobs_left_out:
            self.left_out(len(outcome.jobs_left_out), by="max_series")

    def left_out(self, jobs: int, by: str = "max_jobs") -> None:
        provider, target = self.labels
        self.metrics.jobs_left_out.labels(provider, target).inc(jobs)
        if not self._warned_limit:
            self._warned_limit = True
            log.warning(f"{by} reached: jobs left out", provider=provider, target=target, jobs=jobs)
