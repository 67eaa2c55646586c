"""Polling, decoupled from scraping: one runner per target (`exporter.work.runner`).

Each runner lists its target's jobs once a round and reads their parts through a paced work
queue; the scheduler starts them, tells when every target finished its first round (for
`/-/ready`) and stops them, cancelling in-flight calls and closing every provider session. A
reload adds, removes and replaces runners while the others run on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from exporter.logs import get_logger
from exporter.work.runner import TargetRunner

log = get_logger(__name__)


class Scheduler:
    def __init__(self, runners: Sequence[TargetRunner]) -> None:
        self.runners = list(runners)
        self._tasks: dict[TargetRunner, asyncio.Task[None]] = {}
        self._started = False
        # Once ready, a reload's new targets do not make the exporter unready again.
        self._was_ready = False

    def start(self) -> None:
        self._started = True
        for runner in self.runners:
            self._start(runner)

    def add(self, runner: TargetRunner) -> None:
        self.runners.append(runner)
        if self._started:
            self._start(runner)

    async def remove(self, runner: TargetRunner) -> None:
        self.runners.remove(runner)
        await self._stop(runner)

    def _start(self, runner: TargetRunner) -> None:
        name = f"poll-{runner.labels[0]}-{runner.labels[1]}"
        self._tasks[runner] = asyncio.create_task(runner.run(), name=name)

    @property
    def ready(self) -> bool:
        """Every target finished its first round, success or not."""
        if not self._was_ready:
            self._was_ready = all(r.ready.is_set() for r in self.runners)
        return self._was_ready

    async def wait_ready(self, timeout: float | None = None) -> bool:
        waits = [r.ready.wait() for r in self.runners]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*waits), timeout)
        return self.ready

    async def stop(self) -> None:
        """Cancel in-flight rounds and calls and close every provider session."""
        self._started = False
        for runner in list(self.runners):
            await self._stop(runner)

    async def _stop(self, runner: TargetRunner) -> None:
        task = self._tasks.pop(runner, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await runner.provider.close()
        except Exception:
            log.exception("closing provider failed", target=runner.labels[1])
