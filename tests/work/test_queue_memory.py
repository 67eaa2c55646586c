"""What the queue keeps per item once every item has been read: its heap entry, not copies of
it, and no per-unit or warm-up sets left over."""

from __future__ import annotations

import gc
import tracemalloc

from exporter.providers.base import Unit
from exporter.work.queue import WorkQueue
from tests.runner_helpers import SteppedClock
from tests.work.sim import ITEMS, tiers

# 7,000 items. The bytes an item do not depend on the count (205 B at 500, 1,000 and 2,000
# units): each set's and dict's table grows with it, and the queue's fixed part is lost in it.
UNITS = 1000


async def test_a_warm_queue_keeps_about_a_heap_entry_and_its_two_times_per_item() -> None:
    clock = SteppedClock()
    plan = tiers(60.0, ITEMS)
    units = [Unit(f"job-{k:05}", f"job-{k:05}", ITEMS) for k in range(UNITS)]
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        queue = WorkQueue(plan, lambda: plan.intervals, clock, clock.sleep)
        queue.sync(units)
        for _ in range(UNITS * len(ITEMS)):
            queue.done(await queue.take())
        assert queue.warm()
        gc.collect()
        per_item = (tracemalloc.get_traced_memory()[0] - base) / (UNITS * len(ITEMS))
    finally:
        tracemalloc.stop()
    # A 6-tuple (96 B) and two floats (64 B) in a heap (8 B) and a dict (~40 B): ~210 B.
    # A copy of the two times per item, a read set per unit, and the emptied warm-up sets'
    # tables made it ~420 B.
    assert per_item < 280, f"{per_item:.0f} B an item"
