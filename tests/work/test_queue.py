"""The work queue's schedule, driven slot by slot as a sender at a fixed rate would drive it,
on a clock of its own: after a start-up longer than the fast interval, or after the plan moves
an interval, each tier's reads sit evenly over its interval again and no read of a unit comes
later than its interval after the one before."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

from exporter.providers.base import Unit
from exporter.transport.gate import Gate
from exporter.work.queue import EARLY, WorkQueue
from exporter.work.tiers import TierPlan

MEDIUM = tuple(f"m{i}" for i in range(8))
TIERS = TierPlan(
    {"fast": 20.0, "medium": 200.0, "slow": 600.0},
    {"fast": ("gpu",), "medium": MEDIUM, "slow": ()},
)
UNITS = [Unit(f"u{k}", f"u{k}", ("gpu", *MEDIUM)) for k in range(400)]
# 400 GPU reads every 20 s and 3,200 medium ones every 200 s: 36 of the 40 requests a second.
# The first full read (3,600 calls) takes 90 s, four and a half fast intervals.
RATE = 40.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


Reads = list[tuple[float, str, str]]


async def drive(queue: WorkQueue, clock: Clock, until: float, reads: Reads) -> None:
    """One slot every 1/RATE s: the queue's next call goes out in it, if one is due."""
    while clock.now < until:
        if not queue.idle():
            call = await queue.take()
            reads.append((clock.now, str(call.unit.key), call.item))
            queue.done()
        clock.now += 1 / RATE


def gpu_reads(reads: Reads, since: float) -> dict[str, list[float]]:
    found: dict[str, list[float]] = defaultdict(list)
    for at, unit, item in reads:
        if item == "gpu" and at >= since:
            found[unit].append(at)
    return found


def busiest_tenth(reads: Reads, since: float, until: float, interval: float) -> float:
    """The most GPU reads in a tenth of the interval, over the mean a tenth should hold."""
    width = interval / 10
    counts = Counter(
        int((at - since) // width) for at, _, item in reads if item == "gpu" and since <= at < until
    )
    return max(counts.values()) / (len(UNITS) / 10)


def longest_gap(reads: Reads, since: float) -> float:
    return max(
        b - a for times in gpu_reads(reads, since).values() for a, b in itertools.pairwise(times)
    )


async def test_reads_spread_evenly_again_after_a_start_longer_than_the_interval() -> None:
    clock = Clock()
    queue = WorkQueue(TIERS, lambda: TIERS.intervals, Gate(clock), clock)
    queue.sync(UNITS)
    reads: Reads = []
    await drive(queue, clock, 1400.0, reads)
    # After the first full read (90 s) and two fast intervals.
    warm = 1000.0 + 90.0 + 40.0
    # Spread: the old schedule read the GPU of units caught up after the start back to back
    # ever after, 2 x the mean in a tenth of the interval (all 40 slots a second).
    assert busiest_tenth(reads, warm, 1400.0, 20.0) <= 1.3
    assert longest_gap(reads, warm) <= 20.0 * EARLY + 0.1


async def test_a_moved_interval_keeps_every_gap_within_it_and_the_spread_comes_back() -> None:
    clock = Clock()
    intervals = dict(TIERS.intervals)
    queue = WorkQueue(TIERS, lambda: intervals, Gate(clock), clock)
    queue.sync(UNITS)
    reads: Reads = []
    await drive(queue, clock, 1200.0, reads)
    intervals["fast"] = 23.0
    await drive(queue, clock, 1400.0, reads)
    assert longest_gap(reads, 1200.0) <= 23.0
    intervals["fast"] = 18.0
    await drive(queue, clock, 1800.0, reads)
    assert longest_gap(reads, 1420.0) <= 18.0
    # Back on the grid within ten reads (CONVERGE): even again, at about one read a unit per
    # interval, not one extra in every interval.
    assert busiest_tenth(reads, 1600.0, 1800.0, 18.0) <= 1.3
    per_unit = [len(times) for times in gpu_reads(reads, 1600.0).values()]
    assert max(per_unit) <= 200.0 / (18.0 * EARLY) + 1
