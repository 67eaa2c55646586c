"""A target's schedule: which call to make next.

The rule: final reads first; then, of the reads that are released, those of the fastest
tier, earliest deadline first (ties: `pods` and `basic` first, then the order units joined).
A read is one item of one unit. Its deadline is EARLY x the tier's effective interval after
the read before was taken (after the unit joined, for a first read, which is released at
once). The second read is released at the unit's phase point, the first time after the first
read that is `phase` of an interval past the queue's epoch; each later one EARLY x the
interval after the one before was released, or after it was taken when that was an interval
late (no unit is read twice in a row). The units that join in one `sync` share the interval
in the order they came (the i-th of n: i / n past their batch's start, batch b's start b x
the golden ratio, mod 1).

So new units are read breadth-first (every one's fast items, then every unit's pods, then the
rest), while units already read keep their fast cadence, their deadlines coming first. Units
that joined together are spread evenly over the interval by their phases and stay spread,
neighbours in the list read close together: a provider lists jobs in the order the exposition
writes them, so the reads between two renders change a few runs of each family's lines, not
a line here and there in every chunk (`exporter.rendering.chunks`). A
budget short of the plan falls on the slowest tiers. Released relative to the release before,
a tier's cadence does not drift with the wait for a budget slot.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from exporter.model import FINAL_TIER
from exporter.providers.base import TierPlan, Unit
from exporter.work.plan import EARLY
from exporter.work.tiers import TIERS

_GOLDEN: Final = (math.sqrt(5) - 1) / 2
# Waiting: (release, unit order, item index, deadline, unit key, item); released:
# (deadline, rank, unit order, item index, release, unit key, item).
_Waiting = tuple[float, int, int, float, Hashable, str]
_Ready = tuple[float, int, int, int, float, Hashable, str]


def _phases(batch: int, joining: list[Hashable]) -> dict[Hashable, float]:
    """The phases of units joining together, in their order: the interval shared evenly from
    their batch's start."""
    start, count = batch * _GOLDEN, len(joining)
    return {key: (start + index / count) % 1.0 for index, key in enumerate(joining)}


class Call(NamedTuple):
    """One read to make (a tuple: one is made a read, in a third of a frozen dataclass's time)."""

    unit: Unit
    item: str
    # The tier whose bound the call's parts live under (FINAL_TIER for a final read).
    tier: str


@dataclass(slots=True)
class _UnitState:
    unit: Unit
    order: int
    # Where in each interval its reads after the first are released (the module's doc).
    phase: float
    # Per item read: its next read's live heap entry (a stale entry is not this object's
    # equal in release and deadline); the entry itself, not a copy of its two times.
    due: dict[str, _Waiting] = field(default_factory=dict)
    # Items read at least once: never changed in place, so that units with every item read
    # share one frozenset (`mark_read`).
    read: Set[str] = frozenset()

    def mark_read(self, item: str, all_read: dict[tuple[str, ...], frozenset[str]]) -> None:
        """Count `item` read once; with every item read, the unit holds the set in `all_read`
        that all units of the same items share."""
        read, items = self.read | {item}, self.unit.items
        if len(read) == len(items) and all(i in read for i in items):
            read = all_read.setdefault(items, frozenset(items))
        self.read = read


class WorkQueue:
    def __init__(
        self,
        tiers: TierPlan,
        intervals: Callable[[], Mapping[str, float]],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._tier_of = {item: tier for tier, items in tiers.items.items() for item in items}
        self._state_items = tiers.first
        self._intervals = intervals
        self._clock, self._sleep = clock, sleep
        self._epoch = clock()
        self._joined = 0
        # The syncs that brought units in: each batch's start in the interval is its number's.
        self._batches = 0
        self._units: dict[Hashable, _UnitState] = {}
        self._waiting: dict[str, list[_Waiting]] = {tier: [] for tier in TIERS}
        self._ready: dict[str, list[_Ready]] = {tier: [] for tier in TIERS}
        # Final reads, and calls handed back unsent (refused credentials): before anything else.
        self._first: deque[Call] = deque()
        self._changed = asyncio.Event()
        # Calls taken by workers and not yet done.
        self._taken = 0
        # Items never taken, and first reads taken and not yet done: warm when both are empty.
        self._unread: set[tuple[Hashable, str]] = set()
        self._opening: set[tuple[Hashable, str]] = set()
        # Per items tuple, the read set of a unit with every item read: shared by all of them.
        self._all_read: dict[tuple[str, ...], frozenset[str]] = {}
        # The latest a call was taken after it came due, since `lateness()` last asked.
        self._late = 0.0
        # Set while `warm()`: the runner waits on it for its first round to be read.
        self.warmed = asyncio.Event()
        self.warmed.set()

    def carry(self, other: WorkQueue) -> None:
        """Go on with `other`'s schedule (a reload): every item still read keeps its due time
        and its phase; items this target does not read are dropped."""
        self._epoch, self._joined, self._batches = other._epoch, other._joined, other._batches
        for key, old in other._units.items():
            state = _UnitState(old.unit, old.order, old.phase, read=old.read)
            self._units[key] = state
            for item, entry in old.due.items():
                if item in self._tier_of:
                    self._push(state, item, entry[0], entry[3])
        self._first.extend(other._first)
        self._warmth()

    def sync(self, units: Iterable[Unit]) -> None:
        """Read exactly `units` from now on. An item not read before is released now, its
        deadline an interval away."""
        now = self._clock()
        wanted = {unit.key: unit for unit in units}
        for key in [k for k in self._units if k not in wanted]:
            self.forget(key)
        joining = [k for k in wanted if k not in self._units]
        self._batches += bool(joining)
        phases = _phases(self._batches, joining)
        for key, unit in wanted.items():
            state = self._units.get(key)
            if state is None:
                self._joined += 1
                state = self._units[key] = _UnitState(unit, self._joined, phases[key])
            elif state.unit.items == unit.items:
                state.unit = unit
                continue
            state.unit = unit
            items = [i for i in unit.items if i in self._tier_of]
            for item in [i for i in state.due if i not in items]:
                del state.due[item]
                self._unread.discard((key, item))
            intervals = self._intervals()
            for item in items:
                if item not in state.due:
                    self._push(state, item, now, now + EARLY * intervals[self._tier_of[item]])
        self._changed.set()
        self._warmth()

    def add_final(self, unit: Unit) -> None:
        """One read of every item of `unit`, before anything else."""
        self._first.extend(Call(unit, item, FINAL_TIER) for item in unit.items)
        self._changed.set()
        self._warmth()

    def forget(self, key: Hashable) -> None:
        state = self._units.pop(key, None)
        if state is not None:
            self._unread.difference_update((key, item) for item in state.due)
            self._warmth()

    def again(self, call: Call) -> None:
        """A call handed back unsent: first in line."""
        self._first.appendleft(call)
        self._changed.set()
        self._warmth()

    def done(self, call: Call) -> None:
        """A call `take()` gave is over (made, or handed back with `again`)."""
        self._taken -= 1
        opening = self._opening
        if opening:
            opening.discard((call.unit.key, call.item))
            if not opening:
                # An emptied set keeps its table (a unit's worth of slots per unit in a
                # round of first reads); a new one holds none.
                self._opening = set()
        self._warmth()

    def warm(self) -> bool:
        """Every item of every unit read once, and no first read still out. Later reads may be
        out: while the budget is short of the plan, a worker always holds one."""
        return not (self._unread or self._opening or self._first)

    def _warmth(self) -> None:
        if self.warm():
            self.warmed.set()
        else:
            self.warmed.clear()

    def lateness(self) -> float:
        """How late after their release, at most, calls were taken since the last call."""
        now = self._clock()
        overdue = [now - top[4] for tier in TIERS if (top := self._top(tier, now)) is not None]
        late, self._late = max(self._late, *overdue, 0.0), 0.0
        return late

    async def take(self) -> Call:
        """The next call to make, once it is released."""
        woke = -math.inf
        while True:
            if self._first:
                self._taken += 1
                call = self._first.popleft()
                self._warmth()
                return call
            # Timed out waiting for a release: it is due, even when asyncio's clock resolution
            # ran the timer a nanosecond early.
            now = max(self._clock(), woke)
            tier = self._released(now)
            if tier is not None:
                self._taken += 1
                return self._pop(tier, now)
            soonest = min((w[0][0] for w in self._waiting.values() if w), default=math.inf)
            self._changed.clear()
            passed = await _wait(self._changed, self._sleep, max(0.0, soonest - now))
            woke = soonest if passed else -math.inf

    def _released(self, now: float) -> str | None:
        """The fastest tier with a read released by now."""
        return next((t for t in TIERS if self._top(t, now) is not None), None)

    def _pop(self, tier: str, now: float) -> Call:
        _, _, _, _, release, key, item = heapq.heappop(self._ready[tier])
        state = self._units[key]
        self._late = max(self._late, now - release)
        interval = self._intervals()[tier]
        if item not in state.read:
            # The second read: the unit's next phase point.
            state.mark_read(item, self._all_read)
            self._unread.discard((key, item))
            if not self._unread:
                self._unread = set()
            self._opening.add((key, item))
            turns = math.floor((now - self._epoch) / interval - state.phase) + 1
            following = self._epoch + (state.phase + turns) * interval
        else:
            following = release + EARLY * interval
            if following <= now:
                following = now + EARLY * interval
        self._push(state, item, following, now + EARLY * interval)
        return Call(state.unit, item, tier)

    def _live(self, state: _UnitState | None, item: str, release: float, deadline: float) -> bool:
        entry = None if state is None else state.due.get(item)
        return entry is not None and entry[0] == release and entry[3] == deadline

    def _top(self, tier: str, now: float) -> _Ready | None:
        """The tier's released read with the earliest deadline; stale entries (gone units,
        moved items) are dropped."""
        waiting, ready = self._waiting[tier], self._ready[tier]
        while waiting and waiting[0][0] <= now:
            release, order, index, deadline, key, item = heapq.heappop(waiting)
            state = self._units.get(key)
            if self._live(state, item, release, deadline):
                rank = 0 if item in self._state_items else 1
                heapq.heappush(ready, (deadline, rank, order, index, release, key, item))
        while ready:
            deadline, _, _, _, release, key, item = ready[0]
            if self._live(self._units.get(key), item, release, deadline):
                return ready[0]
            heapq.heappop(ready)
        return None

    def _push(self, state: _UnitState, item: str, release: float, deadline: float) -> None:
        """Schedule `item`'s next read; one never read yet counts as unread until taken."""
        entry = (release, state.order, state.unit.items.index(item), deadline, state.unit.key, item)
        state.due[item] = entry
        if item not in state.read:
            self._unread.add((state.unit.key, item))
        heapq.heappush(self._waiting[self._tier_of[item]], entry)


async def _wait(
    changed: asyncio.Event, sleep: Callable[[float], Awaitable[None]], delay: float
) -> bool:
    """Until `changed` is set or `sleep(delay)` ends: True when the delay passed. A cancel is
    never swallowed: the event is awaited directly. asyncio's own sleep is waited as a timeout
    of the loop's, without a task of its own (a third less CPU a wait, and workers wait for
    most calls)."""
    if sleep is asyncio.sleep:
        # asyncio.timeout, not wait_for: Python 3.11's wait_for returns what it waited for
        # when that comes in the same turn as a cancel, and the cancel is lost.
        try:
            async with asyncio.timeout(None if math.isinf(delay) else delay):
                await changed.wait()
        except TimeoutError:
            return True
        return False
    timer = asyncio.ensure_future(sleep(delay))
    timer.add_done_callback(lambda done: None if done.cancelled() else changed.set())
    try:
        await changed.wait()
    finally:
        timer.cancel()
    return timer.done() and not timer.cancelled()
