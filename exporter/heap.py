"""The cyclic collector's pace, the GIL's, and giving freed memory back to the system.

The store and its renderings are most of the heap, freed by reference counts, never in a cycle.
`Heap` freezes what survives each collection (`gc.freeze()` from a `gc.callbacks` hook), so a
collection walks only what was made since the last one, and `keep` collects the whole heap once
per `period`.
The cost is that full collection's pause, once a period; the bound, that anything dying in a
cycle after it survived a collection (a traceback and its frames, a finished future) lives at
most a period. Frozen objects are out of `gc.get_objects()` and `gc.get_referrers()`: call
`gc.unfreeze()` before inspecting the heap.

The hook unfreezes from the full collection's own `start` phase: no other collection, on any
thread, can start (and freeze the heap again) before that one has walked it.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import sys
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

# A young collection walks what was made since the last one: this sets its pause and how often
# it comes (bench/README.md has the trade-off).
GC_YOUNGEST_THRESHOLD = 2_000

# The store is rendered in a thread while the loop serves scrapes: a scrape during a render
# waits up to the switch interval (5 ms by default) each time it asks for the GIL.
SWITCH_INTERVAL = 0.0005

# The age of the oldest frozen garbage, against a pause the length of a walk of the whole heap.
FULL_COLLECTION_EVERY = 300.0

try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6")
    _LIBC.malloc_trim, _LIBC.mallopt  # type: ignore[union-attr]  # noqa: B018 - glibc only
except (OSError, AttributeError):
    _LIBC = None
_M_ARENA_MAX = -8  # glibc's mallopt parameter for the most arenas
_OLDEST = len(gc.get_threshold()) - 1  # the generation a full collection collects


def release_memory() -> None:
    """Give free pages back (glibc's `malloc_trim`): a full change frees ~20 MB of lines in
    small blocks between live ones, which glibc would keep."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class Heap:
    """Freezes what survives each collection, and collects everything once per `period`."""

    def __init__(
        self, period: float = FULL_COLLECTION_EVERY, clock: Clock = time.monotonic
    ) -> None:
        self.period, self._clock, self._collected_at = period, clock, clock()
        self._thaw = False  # taken by the next full collection's start

    def install(self) -> None:
        if self._hook not in gc.callbacks:
            gc.callbacks.append(self._hook)

    def _hook(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            gc.freeze()
        elif self._thaw and info["generation"] == _OLDEST:
            self._thaw = False
            gc.unfreeze()

    def collect(self) -> int:
        """Collect the whole heap now, frozen objects too; the unreachable objects found."""
        self._thaw = True  # for the next full collection, on whichever thread
        found = gc.collect()
        # gc.collect() does nothing while another thread is collecting: until one took it.
        while self._thaw and self._hook in gc.callbacks:
            found += gc.collect()
        self._collected_at = self._clock()
        return found

    def settle(self) -> None:
        """Collect the whole heap if a period has passed since, and give free pages back."""
        if self._clock() - self._collected_at >= self.period:
            self.collect()
        release_memory()

    async def keep(
        self, on_error: Callable[[Exception], None], sleep: Sleep = asyncio.sleep
    ) -> NoReturn:
        """Settle once per period in a thread (`malloc_trim` lets go of the GIL), rendering or
        not (what scrapes leave is frozen too); a round that raises goes to `on_error`."""
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
    youngest, *older = gc.get_threshold()
    gc.set_threshold(max(youngest, GC_YOUNGEST_THRESHOLD), *older)
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
    _heap = _heap or Heap()
    _heap.install()
    # The render thread's allocations in an arena of their own doubled the heap's peaks.
    if _LIBC is not None:
        _LIBC.mallopt(_M_ARENA_MAX, 1)
    return _heap
