"""A target's work queue: when each unit's tier is next due, and the calls due now.

One heap entry per (unit, tier): its due time. When an entry comes due it becomes its calls
(one per item of the unit in that tier) and is scheduled again EARLY x its effective interval
later, counted from when it was due, so a tier's cadence does not drift with call latency. The
runner's fixed set of workers takes calls one at a time, so what is in flight is bounded by
the workers whatever the job list says; the rate limiter in `LimitedClient` bounds each second.

Spreading: a new unit is read in full first (a job is fully read within one fast interval of
appearing, not at its slow tier's turn). After that its reads of a tier sit on its own grid:
the tier's epoch plus (phase + n) x the interval, where unit k's phase is the fractional part
of k x the golden ratio. Any number of units then sits evenly over each interval, so calls are
spread over it instead of bursting at the start of a round (500 units read every 60 s come due
about every 0.12 s, never 500 at once). A read that comes off its grid (one caught up after a
start longer than the interval, or an interval the plan moved) is steered back onto it,
never by lengthening a gap past its interval. Counting each read from the last one instead
kept units caught up together back to back for good: at scale 3, the GPU reads of 500 pods
took every slot for 13 s of each 21 s, and gaps ran up to 3 s past the schedule.

Order: final reads, then first reads of new units, then of the tiers that are due the
fastest, earliest due first within a tier. When the budget falls short of the plan (a loaded
machine sending 87 of 100 planned requests a second), the shortfall lands on the slow tiers
and GPU utilisation keeps its pace; the runner then plans with the rate it achieved. A unit
gone from the listing is forgotten at once; its heap entries are skipped when they surface.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from exporter.model import FINAL_TIER
from exporter.providers.base import Unit
from exporter.transport.gate import Gate
from exporter.work.tiers import TIERS, TierPlan

_GOLDEN = (math.sqrt(5) - 1) / 2
# Reads are scheduled this share of their effective interval apart, so that dispatch jitter
# (0.3 s on a 7.2 s tier beside a test run) does not carry a gap past the interval exported;
# it spends 3 of the plan's 5 % headroom.
EARLY: Final = 0.97
# Steering back onto the grid: a read comes at most CONVERGE of its interval early, so a unit
# is on its grid again within 10 reads at 11 % more calls meanwhile, or SLACK late (a moved
# interval's small shifts), still within the 3 % of EARLY.
CONVERGE: Final = 0.1
SLACK: Final = 0.02
_Entry = tuple[float, int, Hashable, int]


@dataclass(frozen=True, slots=True)
class Call:
    unit: Unit
    item: str
    # The tier whose bound the call's parts live under (FINAL_TIER for a final read).
    tier: str
    # When its tier came due (time.monotonic()).
    due: float


@dataclass(slots=True)
class _UnitState:
    unit: Unit
    phase: float
    # Which joining of the unit this is: entries of an earlier one are skipped.
    generation: int
    # Tiers with an entry in the heap.
    scheduled: set[str] = field(default_factory=set)
    # Tiers read at least once (for the others, the next read is the grid's next point).
    read: set[str] = field(default_factory=set)
    # Waiting for its first read (in `_fresh`): its tiers are scheduled when that is taken.
    fresh: bool = True


class WorkQueue:
    def __init__(
        self,
        tiers: TierPlan,
        intervals: Callable[[], Mapping[str, float]],
        gate: Gate,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._tiers = tiers
        self._intervals = intervals
        self._gate = gate
        self._clock = clock
        self._units: dict[Hashable, _UnitState] = {}
        # Per tier: (due, sequence, unit key, generation), earliest due first.
        self._heaps: dict[str, list[_Entry]] = {tier: [] for tier in TIERS}
        # First reads of new units, then each tier's calls of entries that came due: a due
        # fast read goes before the rest of a slow entry's 15 calls (150 ms at 100 req/s).
        self._ready: deque[Call] = deque()
        self._queued: dict[str, deque[Call]] = {tier: deque() for tier in TIERS}
        self._finals: deque[Call] = deque()
        # Units not read yet, in the order they joined.
        self._fresh: deque[_UnitState] = deque()
        # Per tier: the epoch and interval its grid was last laid out with.
        self._grids: dict[str, tuple[float, float]] = {}
        self._seq = itertools.count()
        self._joined = itertools.count(1)
        self._changed = asyncio.Event()
        # Calls taken by workers and not yet done.
        self._taken = 0
        # The latest a tier was taken after it came due, since `lateness()` last asked.
        self._late = 0.0
        # Times a worker found nothing due and waited, since `waits()` last asked: none in a
        # round means the budget (or the machine), not the plan, set the pace.
        self._waits = 0

    def sync(self, units: Iterable[Unit]) -> int:
        """Make the queue read exactly `units` from now on; returns how many are new."""
        now = self._clock()
        wanted = {unit.key: unit for unit in units}
        for key in [k for k in self._units if k not in wanted]:
            del self._units[key]
        new = 0
        for key, unit in wanted.items():
            state = self._units.get(key)
            if state is None:
                new += 1
                joined = next(self._joined)
                state = _UnitState(unit, (joined * _GOLDEN) % 1.0, joined)
                self._units[key] = state
                self._fresh.append(state)
                continue
            state.unit = unit
            if state.fresh:
                continue
            for tier in TIERS:
                if tier not in state.scheduled and self._items(unit, tier):
                    # A tier the unit did not have: read at once, then at its cadence.
                    self._push(now, tier, state)
                    state.scheduled.add(tier)
        self._changed.set()
        return new

    def add_final(self, unit: Unit) -> None:
        """One read of every item of `unit`, before anything else."""
        now = self._clock()
        self._finals.extend(Call(unit, item, FINAL_TIER, now) for item in unit.items)
        self._changed.set()

    def take_finals(self) -> list[Call]:
        finals = list(self._finals)
        self._finals.clear()
        return finals

    def warm(self) -> bool:
        """Every unit read once in full (its calls made), and nothing left to take now."""
        unread = self._fresh or any(s.read != s.scheduled for s in self._units.values())
        return not (unread or self._pending() or self._taken)

    def idle(self) -> bool:
        """Nothing due, nothing waiting to be taken, nothing taken and not yet done."""
        now = self._clock()
        due = any((top := self._top(t)) is not None and top[0] <= now for t in TIERS)
        return not (due or self._fresh or self._pending() or self._taken)

    def _pending(self) -> bool:
        return bool(self._finals or self._ready or any(self._queued.values()))

    def done(self) -> None:
        """A call `take()` gave is over (made, or handed back with `again`)."""
        self._taken -= 1

    def forget(self, key: Hashable) -> None:
        self._units.pop(key, None)

    def again(self, call: Call) -> None:
        """A call that could not be sent (the gate closed): first in line once it opens."""
        (self._finals if call.tier == FINAL_TIER else self._queued[call.tier]).appendleft(call)
        self._changed.set()

    def waits(self) -> int:
        waits, self._waits = self._waits, 0
        return waits

    def lateness(self) -> float:
        """How late, at most, tiers were taken since the last call, or are now overdue."""
        late, self._late = max(self._late, self.lag()), 0.0
        return late

    def lag(self) -> float:
        """Seconds the oldest call that is due has waited (0 when nothing is overdue)."""
        now = self._clock()
        dues = [q[0].due for q in (self._ready, *self._queued.values()) if q]
        for tier in TIERS:
            top = self._top(tier)
            if top is not None:
                dues.append(top[0])
        return max(0.0, now - min(dues, default=now))

    def _top(self, tier: str) -> _Entry | None:
        """The earliest live entry of a tier; stale ones (of gone units) are dropped."""
        heap = self._heaps[tier]
        while heap:
            _, _, key, generation = heap[0]
            state = self._units.get(key)
            if state is not None and state.generation == generation and tier in state.scheduled:
                return heap[0]
            heapq.heappop(heap)
        return None

    async def take(self) -> Call:
        """The next call to make, once it is due and the gate is open."""
        while True:
            await self._gate.wait_open()
            if self._finals:
                self._taken += 1
                return self._finals.popleft()
            call = self._live(self._ready)
            if call is None and self._expand_fresh():
                continue
            if call is None:
                call = self._next_of_tiers()
            if call is not None:
                self._taken += 1
                return call
            wait = self._soonest()
            self._waits += 1
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=wait)

    def _expand_fresh(self) -> bool:
        """A new unit's every item, at once; its tiers then follow their cadence from now."""
        while self._fresh:
            state = self._fresh.popleft()
            if self._units.get(state.unit.key) is not state:
                continue
            state.fresh = False
            now = self._clock()
            for tier in TIERS:
                items = self._items(state.unit, tier)
                if not items or tier in state.scheduled:
                    continue
                self._ready.extend(Call(state.unit, item, tier, now) for item in items)
                state.scheduled.add(tier)
                self._push(self._next_due(state, tier, now, now), tier, state)
            return True
        return False

    def _live(self, calls: deque[Call]) -> Call | None:
        """The first call of `calls` whose unit is still read."""
        while calls:
            call = calls.popleft()
            if call.unit.key in self._units:
                return call
        return None

    def _next_of_tiers(self) -> Call | None:
        """The fastest tier's next call: one already expanded, else its due entry's first."""
        now = self._clock()
        for tier in TIERS:
            queued = self._queued[tier]
            while True:
                call = self._live(queued)
                if call is not None:
                    return call
                if not self._expand_due(tier, now):
                    break
        return None

    def _expand_due(self, tier: str, now: float) -> bool:
        """Turn the tier's earliest entry, when it is due, into calls (queued for the tier)."""
        top = self._top(tier)
        if top is None or top[0] > now:
            return False
        due, _, key, _ = top
        heapq.heappop(self._heaps[tier])
        state = self._units[key]
        self._late = max(self._late, now - due)
        items = self._items(state.unit, tier)
        if not items:
            state.scheduled.discard(tier)
            return True
        self._queued[tier].extend(Call(state.unit, item, tier, due) for item in items)
        self._push(self._next_due(state, tier, due, now), tier, state)
        return True

    def _soonest(self) -> float | None:
        """Seconds until an entry comes due; None when nothing is scheduled."""
        dues = [top[0] for tier in TIERS if (top := self._top(tier)) is not None]
        return max(0.0, min(dues) - self._clock()) if dues else None

    def _next_due(self, state: _UnitState, tier: str, due: float, now: float) -> float:
        """The read after one due at `due` and taken at `now`: an interval on, moved onto the
        unit's grid by at most CONVERGE earlier or SLACK later."""
        interval = self._intervals()[tier] * EARLY
        following = due + interval
        if tier not in state.read or following < now:
            # A first read, or one so late that its next turn has passed too (a start, a
            # stall): the grid's next point, never every missed interval at once.
            state.read.add(tier)
            return self._on_grid(state, tier, now, interval) + interval
        point = self._on_grid(state, tier, following + SLACK * interval, interval)
        return max(point, following - CONVERGE * interval)

    def _on_grid(self, state: _UnitState, tier: str, at: float, interval: float) -> float:
        """The unit's latest grid point at or before `at`."""
        epoch = self._epoch(tier, interval)
        turns = math.floor((at - epoch) / interval - state.phase)
        return epoch + (state.phase + turns) * interval

    def _epoch(self, tier: str, interval: float) -> float:
        """The tier's grid epoch for `interval`. A new interval keeps the grid's place in its
        turn at this moment, so units near their point now stay near it."""
        now = self._clock()
        epoch, laid = self._grids.get(tier, (now, interval))
        if laid != interval:
            epoch = now - ((now - epoch) / laid % 1.0) * interval
        self._grids[tier] = (epoch, interval)
        return epoch

    def _items(self, unit: Unit, tier: str) -> tuple[str, ...]:
        members = self._tiers.items[tier]
        return tuple(item for item in unit.items if item in members)

    def _push(self, due: float, tier: str, state: _UnitState) -> None:
        entry = (due, next(self._seq), state.unit.key, state.generation)
        heapq.heappush(self._heaps[tier], entry)
