"""A queue keeps time with the clock and sleep it is given: on a stepped clock, its next read
is released when that clock passes the release, whatever the real time."""

from __future__ import annotations

import asyncio

from exporter.providers.base import Unit
from exporter.work.queue import WorkQueue
from tests.runner_helpers import SteppedClock
from tests.work.sim import FAST, tiers


async def test_a_wait_for_the_next_release_ends_when_the_given_clock_passes_it() -> None:
    clock = SteppedClock()
    plan = tiers(60.0, FAST)
    queue = WorkQueue(plan, lambda: plan.intervals, clock, clock.sleep)
    queue.sync([Unit("a", "a", FAST)])
    for _ in FAST:
        queue.done(await queue.take())
    # Job a's next reads are released at its phase point, within an interval.
    taker = asyncio.create_task(queue.take())
    for _ in range(5):
        await asyncio.sleep(0)
    assert not taker.done() and clock.sleeping == 1, "the wait is on the given clock"
    clock.advance(60.0)
    call = await asyncio.wait_for(taker, 5)
    assert call.unit.key == "a" and call.item in FAST


async def test_with_nothing_to_read_a_wait_still_sleeps_on_the_given_clock() -> None:
    clock = SteppedClock()
    plan = tiers(60.0, FAST)
    queue = WorkQueue(plan, lambda: plan.intervals, clock, clock.sleep)
    taker = asyncio.create_task(queue.take())
    for _ in range(5):
        await asyncio.sleep(0)
    # Asleep for good: what steps the clock sees the worker at rest.
    assert not taker.done() and clock.sleeping == 1
    clock.advance(24 * 3600.0)
    queue.sync([Unit("b", "b", FAST)])
    call = await asyncio.wait_for(taker, 5)
    assert call.unit.key == "b"
    taker.cancel()
