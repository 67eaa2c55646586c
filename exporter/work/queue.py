"""A target's work queue: when each unit's tier is next due, and the calls due now.

One heap entry per (unit, tier): its due time. When an entry comes due it becomes its calls
(one per item of the unit in that tier) and is scheduled again one effective interval later,
counted from when it was due, so a tier's cadence does not drift with call latency. The
runner's fixed set of workers takes calls one at a time, so what is in flight is bounded by
the workers whatever the job list says; the rate limiter in `ApiClient` bounds each second.

Spreading: a new unit is read in full at once (every tier due now: a job is fully read within
one fast interval of appearing); its second read of a tier comes after `phase x interval`,
where unit k's phase is the fractional part of k x the golden ratio. Any number of units then
sits evenly over each interval, so calls are spread over it instead of bursting at the start
of a round (500 units read every 60 s come due about every 0.12 s, never 500 at once).

Order: earliest due first; at equal due, final reads, then faster tiers. A unit gone from the
listing is forgotten at once; its heap entries are skipped when they surface.
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

from exporter.api import Gate
from exporter.model import FINAL_TIER
from exporter.providers.base import Unit
from exporter.work.tiers import TIERS, TierPlan

_GOLDEN = (math.sqrt(5) - 1) / 2
_RANK = {FINAL_TIER: -1, **{tier: rank for rank, tier in enumerate(TIERS)}}


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
    # Tiers read at least once (the next read of the others follows the phase).
    read: set[str] = field(default_factory=set)


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
        # (due, rank, sequence, unit key, generation, tier)
        self._heap: list[tuple[float, int, int, Hashable, int, str]] = []
        self._ready: deque[Call] = deque()
        self._finals: deque[Call] = deque()
        self._seq = itertools.count()
        self._joined = itertools.count(1)
        self._changed = asyncio.Event()
        # Calls taken by workers and not yet done.
        self._taken = 0
        # The latest a tier was taken after it came due, since `lateness()` last asked.
        self._late = 0.0

    def __len__(self) -> int:
        return len(self._units)

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
            state.unit = unit
            for tier in TIERS:
                if tier not in state.scheduled and self._items(unit, tier):
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
        unread = any(s.read != s.scheduled for s in self._units.values())
        return not (unread or self._ready or self._finals or self._taken)

    def idle(self) -> bool:
        """Nothing due, nothing waiting to be taken, nothing taken and not yet done."""
        self._drop_stale()
        due = bool(self._heap) and self._heap[0][0] <= self._clock()
        return not (due or self._ready or self._finals or self._taken)

    def done(self) -> None:
        """A call `take()` gave is over (made, or handed back with `again`)."""
        self._taken -= 1

    def forget(self, key: Hashable) -> None:
        self._units.pop(key, None)

    def again(self, call: Call) -> None:
        """A call that could not be sent (the gate closed): first in line once it opens."""
        (self._finals if call.tier == FINAL_TIER else self._ready).appendleft(call)
        self._changed.set()

    def lateness(self) -> float:
        """How late, at most, tiers were taken since the last call, or are now overdue."""
        late, self._late = max(self._late, self.lag()), 0.0
        return late

    def lag(self) -> float:
        """Seconds the oldest call that is due has waited (0 when nothing is overdue)."""
        now = self._clock()
        self._drop_stale()
        oldest = min(
            (self._ready[0].due if self._ready else now, self._heap[0][0] if self._heap else now)
        )
        return max(0.0, now - oldest)

    def _live(self, entry: tuple[float, int, int, Hashable, int, str]) -> _UnitState | None:
        _, _, _, key, generation, tier = entry
        state = self._units.get(key)
        if state is None or state.generation != generation or tier not in state.scheduled:
            return None
        return state

    def _drop_stale(self) -> None:
        while self._heap and self._live(self._heap[0]) is None:
            heapq.heappop(self._heap)

    async def take(self) -> Call:
        """The next call to make, once it is due and the gate is open."""
        while True:
            await self._gate.wait_open()
            if self._finals:
                self._taken += 1
                return self._finals.popleft()
            if self._ready:
                call = self._ready.popleft()
                if call.unit.key in self._units:
                    self._taken += 1
                    return call
                continue
            wait = self._expand_due()
            if wait == 0.0:
                continue
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=wait)

    def _expand_due(self) -> float | None:
        """Turn the earliest due entry into calls: 0.0 when it did, else seconds to wait."""
        now = self._clock()
        self._drop_stale()
        while self._heap:
            due, _, _, _, _, tier = self._heap[0]
            state = self._live(self._heap[0])
            assert state is not None
            if due > now:
                return due - now
            heapq.heappop(self._heap)
            self._late = max(self._late, now - due)
            items = self._items(state.unit, tier)
            if not items:
                state.scheduled.discard(tier)
                self._drop_stale()
                continue
            self._ready.extend(Call(state.unit, item, tier, due) for item in items)
            self._push(self._next_due(state, tier, due, now), tier, state)
            return 0.0
        return None

    def _next_due(self, state: _UnitState, tier: str, due: float, now: float) -> float:
        interval = self._intervals()[tier]
        if tier not in state.read:
            state.read.add(tier)
            return due + state.phase * interval
        following = due + interval
        # Far behind (a pause, a stall): read once now rather than every missed interval.
        return following if following >= now - interval else now

    def _items(self, unit: Unit, tier: str) -> tuple[str, ...]:
        members = self._tiers.items[tier]
        return tuple(item for item in unit.items if item in members)

    def _push(self, due: float, tier: str, state: _UnitState) -> None:
        entry = (due, _RANK[tier], next(self._seq), state.unit.key, state.generation, tier)
        heapq.heappush(self._heap, entry)
