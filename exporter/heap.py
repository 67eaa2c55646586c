"""The exporter process's heap: the cyclic collector's pace, the GIL's, and giving freed memory
back to the system.

The store and its renderings are most of the heap (at 100k series ~0.3M container objects)
and are freed by reference counts: none of it is in a cycle, yet every walk of the collector
over it paused the process. `Heap` freezes what survives each collection (`gc.freeze()` from a
`gc.callbacks` hook), so a collection walks only what was made since the last one, and `keep`
collects the whole heap once per `period`, rendering or not. What that costs and bounds:

- The longest pause is the full collection's, a walk of the whole heap, once per period.
- Whatever dies in a cycle after surviving a collection (an exception's traceback and frames, a
  finished future, anything in flight at that moment) waits for the next full collection: such
  garbage lives at most one period (tests/test_heap.py checks it with the automatic collector on).
- Frozen objects are out of `gc.get_objects()` and `gc.get_referrers()`: to inspect the heap,
  call `gc.unfreeze()` first (the next collection freezes it again).

The full collection needs no window between unfreezing and collecting: the hook unfreezes from
the collection's own `start` phase, and no other collection can start, on any thread, until
that one has stopped.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import sys
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn

# A young collection walks the container objects made since the last one (the rest is
# frozen): this sets its pause, and how often it comes. bench/README.md has the trade-off.
GC_YOUNGEST_THRESHOLD = 2_000

# The store is rendered in a thread (`exporter.collector.Exposition`) while the event loop
# serves scrapes; a thread that wants the GIL waits up to the switch interval (5 ms by default)
# each time it asks, so a scrape during a render would wait that long at each of its steps.
SWITCH_INTERVAL = 0.0005

# How often the whole heap is collected: the oldest frozen garbage's age, against a pause the
# length of a walk of the whole heap.
FULL_COLLECTION_EVERY = 300.0


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 - glibc only
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()
# glibc's mallopt parameter for the most arenas.
_M_ARENA_MAX = -8
# The generation a full collection collects.
_OLDEST = len(gc.get_threshold()) - 1


def release_memory() -> None:
    """Give the heap's free pages back to the system (glibc's `malloc_trim`): a full change
    frees ~20 MB of lines in many small blocks between live ones, which glibc would keep."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class Heap:
    """Freezes what survives each collection, and collects everything once per `period`."""

    def __init__(
        self, period: float = FULL_COLLECTION_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.period = period
        self._clock = clock
        self._collected_at = clock()
        # Taken by the next full collection's start.
        self._thaw = False
        self.full_collections = 0

    def install(self) -> None:
        if self._hook not in gc.callbacks:
            gc.callbacks.append(self._hook)

    def uninstall(self) -> None:
        if self._hook in gc.callbacks:
            gc.callbacks.remove(self._hook)

    def _hook(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            gc.freeze()
        elif self._thaw and info["generation"] == _OLDEST:
            self._thaw = False
            gc.unfreeze()

    def thaw_next(self) -> None:
        """Make the next full collection, on whichever thread, walk the frozen objects too."""
        self._thaw = True

    def collect(self) -> int:
        """Collect the whole heap now, frozen objects included (what survives is frozen
        again); the number of unreachable objects found."""
        self.thaw_next()
        found = gc.collect()
        self._collected_at = self._clock()
        self.full_collections += 1
        return found

    def settle(self) -> None:
        """Collect the whole heap if a period has passed since the last time, and give free
        pages back."""
        if self._clock() - self._collected_at >= self.period:
            self.collect()
        release_memory()

    async def keep(
        self,
        on_error: Callable[[Exception], None],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> NoReturn:
        """Settle once per period, in a thread (`malloc_trim` lets go of the GIL), rendering or
        not: an exporter whose store never changes renders nothing, yet what survives its
        scrapes is frozen all the same. A round that raises goes to `on_error`, and the next
        round runs as usual: the keeper lasts as long as its task."""
        while True:
            await sleep(self.period)
            try:
                await asyncio.to_thread(self.settle)
            except Exception as exc:  # told; the heap is still there to keep
                on_error(exc)


_heap: Heap | None = None


def tune_runtime() -> Heap:
    """Set the cyclic collector's pace, freeze what survives its collections, and hand the GIL
    round sooner; once per exporter process (cli, bench): the process's `Heap`, for `keep`."""
    global _heap
    youngest, middle, oldest = gc.get_threshold()
    gc.set_threshold(max(youngest, GC_YOUNGEST_THRESHOLD), middle, oldest)
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
    if _heap is None:
        _heap = Heap()
        _heap.install()
    # The render thread's allocations in an arena of their own doubled the heap's peaks.
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, 1)
    return _heap
