"""A worker stopped (a reload, SIGTERM) as work arrives for it stops: the cancellation is never
swallowed by the queue's wait, which would leave the runner's task group waiting on it for good
(the soak saw SIGTERM ignored, once in about forty restarts, until SIGKILL)."""

from __future__ import annotations

import asyncio

from exporter.providers.base import Unit
from exporter.work.queue import WorkQueue
from tests.work.sim import FAST, tiers
from tests.work.virtual import VirtualLoop, simulate


def test_a_take_cancelled_as_its_work_arrives_is_cancelled() -> None:
    async def main(loop: VirtualLoop) -> tuple[bool, object]:
        plan = tiers(60.0, FAST)
        queue = WorkQueue(plan, lambda: plan.intervals, loop.time)
        queue.sync([Unit("a", "a", FAST)])
        for _ in FAST:
            queue.done(await queue.take())
        # Waiting, with a timeout: job a's next reads are a round away.
        taker = asyncio.create_task(queue.take())
        await asyncio.sleep(0)
        # Job b's reads are due now: the wait ends in the same turn as it is cancelled.
        queue.sync([Unit("a", "a", FAST), Unit("b", "b", FAST)])
        taker.cancel()
        await asyncio.wait([taker])
        return taker.cancelled(), None if taker.cancelled() else taker.result()

    cancelled, taken = simulate(main)
    assert cancelled, f"the cancellation was swallowed: take() gave {taken}"
