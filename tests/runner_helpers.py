"""Driving a `TargetRunner` the way these tests call "one poll", beside its own loop.

The runner reads each item at its tier's cadence; tests that inject a fault and look at the
next poll want every item read now. `poll_once` runs the runner's round (the listing, the
plan, the queue's units), then makes every listed unit's calls and its final reads through the
runner's own read path (`runner.read`), publishes and ends the round as its loop does (`up` and
the health, then the lag). It still takes the final reads out of the queue's `_first`: the
queue has no public way to hand them over without a worker's blocking `take()`.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from exporter.model import FINAL_TIER
from exporter.work.queue import Call
from exporter.work.runner import TargetRunner


async def poll_once(runner: TargetRunner) -> None:
    listing = await runner.round()
    if listing is not None and listing.listed:
        tier_of = runner.provider.tiers.tier_of
        calls = [Call(u, i, tier_of(i)) for u in listing.units for i in u.items]
        queue = runner.queue
        calls += [c for c in queue._first if c.tier == FINAL_TIER]
        queue._first = deque(c for c in queue._first if c.tier != FINAL_TIER)
        pending = iter(calls)

        async def work() -> None:
            for call in pending:
                await runner.read(call)

        await asyncio.gather(*(work() for _ in range(runner.workers)))
    await runner.publish()
    runner.health.round_over()
    runner.planner.lag(runner.queue.lateness())
    runner.ready.set()


async def settle(runner: TargetRunner, timeout: float = 30.0) -> bool:
    """Wait until no call is due or in flight, then publish: True if it settled."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue = runner.queue
        if not (queue._first or queue._taken or queue._released(time.monotonic())):
            await runner.publish()
            return True
        await asyncio.sleep(0.02)
    return False
