"""Polling, decoupled from scraping: one loop per target, one scheduler for all of them.

Each target is polled every `poll_interval`, measured from the start of one poll to the start
of the next. A poll never overlaps the next one of the same target: one that overruns is
logged and counted, and the next starts right after it. Each poll's result is merged with the
target's previous snapshot (`exporter.model.merge`) and swapped into the store whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from exporter.logs import get_logger
from exporter.model import PollResult, merge
from exporter.providers.base import PollContext, Provider
from exporter.selfmetrics import SelfMetrics
from exporter.store import SnapshotStore

log = get_logger(__name__)


class TargetPoller:
    def __init__(
        self,
        provider: Provider,
        store: SnapshotStore,
        metrics: SelfMetrics,
        poll_interval: float,
        stale_after: float,
        max_series: int | None = None,
        owns_job: Callable[[str], bool] | None = None,
    ) -> None:
        self.provider = provider
        self.store = store
        self.metrics = metrics
        self.poll_interval = poll_interval
        self.stale_after = stale_after
        self.max_series = max_series
        self.owns_job = owns_job or (lambda job_id: True)
        self.polls = 0
        self.first_poll_done = asyncio.Event()
        self._warned_limit = False
        metrics.register_target(provider.provider, provider.target)

    @property
    def labels(self) -> tuple[str, str]:
        return self.provider.provider, self.provider.target

    async def poll_once(self) -> PollResult:
        """One poll: ask the provider, merge, swap, account. Never raises but on cancel."""
        started = time.monotonic()
        context = PollContext(
            deadline=started + self.poll_interval,
            started_at=time.time(),
            owns_job=self.owns_job,
        )
        try:
            result = await self.provider.poll(context)
        except asyncio.CancelledError:
            raise
        except Exception:
            # A provider bug must not stop the loop: log it, keep the old data under the
            # staleness rule, and report the target down.
            log.exception("poll failed", provider=self.labels[0], target=self.labels[1])
            result = PollResult(listed=False, failed_requests=1)
        self._publish(result)
        duration = time.monotonic() - started
        self.metrics.poll_duration.labels(*self.labels).observe(duration)
        self.polls += 1
        self.first_poll_done.set()
        return result

    def _publish(self, result: PollResult) -> None:
        previous = self.store.get(*self.labels)
        outcome = merge(previous, result, time.time(), self.stale_after, self.max_series)
        self.store.swap(outcome.snapshot)
        self.metrics.series.labels(self.labels[0]).set(
            self.store.view().series_by_provider().get(self.labels[0], 0)
        )
        self.metrics.stale_parts.labels(*self.labels).set(outcome.stale_parts)
        if outcome.jobs_left_out:
            self.metrics.jobs_left_out.labels(*self.labels).inc(len(outcome.jobs_left_out))
            if not self._warned_limit:
                self._warned_limit = True
                log.warning(
                    "max_series reached: jobs left out",
                    provider=self.labels[0],
                    target=self.labels[1],
                    max_series=self.max_series,
                    jobs_left_out=len(outcome.jobs_left_out),
                )
        self.metrics.up.labels(*self.labels).set(1 if result.ok else 0)
        if result.ok:
            self.metrics.last_success.labels(*self.labels).set(time.time())

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            await self.poll_once()
            elapsed = time.monotonic() - started
            if elapsed > self.poll_interval:
                self.metrics.poll_overruns.labels(*self.labels).inc()
                log.warning(
                    "poll overran its interval",
                    provider=self.labels[0],
                    target=self.labels[1],
                    seconds=round(elapsed, 3),
                    poll_interval=self.poll_interval,
                )
                continue
            await asyncio.sleep(self.poll_interval - elapsed)


class Scheduler:
    def __init__(self, pollers: Sequence[TargetPoller]) -> None:
        self.pollers = list(pollers)
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        for poller in self.pollers:
            name = f"poll-{poller.labels[0]}-{poller.labels[1]}"
            self._tasks.append(asyncio.create_task(poller.run(), name=name))

    @property
    def ready(self) -> bool:
        """Every target finished its first poll, success or not."""
        return all(p.first_poll_done.is_set() for p in self.pollers)

    async def wait_ready(self, timeout: float | None = None) -> bool:
        waits = [p.first_poll_done.wait() for p in self.pollers]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        return self.ready

    async def stop(self) -> None:
        """Cancel in-flight polls and close every provider session."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for poller in self.pollers:
            try:
                await poller.provider.close()
            except Exception:
                log.exception("closing provider failed", target=poller.labels[1])
