"""The exporter process's heap: the cyclic collector's pace, the GIL's, and what happens to
the heap once a rendering replaces the last (`exporter.collector.Exposition`).

The store and its renderings are most of the heap (at 100k series ~0.3M container objects)
and are released by reference counts: none of it is in a cycle. Yet the cyclic collector
walked them: under polling at 62k series, its middle generation paused the process for up to
42 ms several times a minute, and a scrape that met such a pause took that much longer.
`Heap` freezes what survives each collection out of the later ones, and collects the whole
heap once per FULL_COLLECTION_EVERY, from `keep` (cli.serve runs it), rendering or not.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import sys
import time
from collections.abc import Awaitable, Callable

# A young collection walks the container objects made since the last one; `Heap` freezes
# what survives, so that is all any collection walks, and this sets its pause. Under polling
# (bench.polling, 62k series, one run each): every 700 gave 703 collections in 2 minutes,
# 159 ms in all; every 2,000, 319 and 110 ms, the longest 2.7 ms; every 4,000, the longest
# 3.9 ms; every 10,000, up to 12.5 ms (and the middle generation, unfrozen, up to 42 ms).
GC_YOUNGEST_THRESHOLD = 2_000


# The store is rendered in a thread (`exporter.collector.Exposition`) while the event loop
# serves scrapes. A thread that wants the GIL waits up to the switch interval, 5 ms by default,
# each time it asks: a scrape during a render (60-100 ms for 4 changed jobs at 100k series)
# would wait that long at each of its steps. Not measured apart: the churn figures are with it.
SWITCH_INTERVAL = 0.0005

# Frozen objects that die in a cycle (what was in flight at a collection) wait for this: a
# full collection, whose pause is the whole heap's walk (73-114 ms at 62k series). Those
# collected 10-35 objects a minute under polling, so a pause every 5 minutes is the cost.
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


def release_memory() -> None:
    """Give the heap's free pages back to the system (glibc's `malloc_trim`), once a render's
    predecessor is dropped (`exporter.collector.Exposition`): a full change frees ~20 MB of
    lines in many small blocks between live ones, which glibc kept (at 100k series, 5 full
    polls left 214 MiB resident without it; 164-169 MiB with it and one arena)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class Heap:
    """Freezes what survives each collection out of the collector's later walks, and collects
    everything once per FULL_COLLECTION_EVERY."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._collected_at = clock()
        self.full_collections = 0

    def install(self) -> None:
        if self._frozen not in gc.callbacks:
            gc.callbacks.append(self._frozen)

    def uninstall(self) -> None:
        if self._frozen in gc.callbacks:
            gc.callbacks.remove(self._frozen)

    def _frozen(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            gc.freeze()

    def settle(self) -> None:
        """Collect everything if it is time (what survives is frozen again), and hand free
        pages back."""
        if self._clock() - self._collected_at >= FULL_COLLECTION_EVERY:
            gc.unfreeze()
            gc.collect()
            self._collected_at = self._clock()
            self.full_collections += 1
        release_memory()

    async def keep(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Settle once per FULL_COLLECTION_EVERY, in a thread as the render's trim is
        (`malloc_trim` lets go of the GIL), rendering or not: an exporter whose store never
        changes (no target, or none that answers) renders nothing, yet its scrapes' survivors
        are frozen all the same."""
        while True:
            await sleep(FULL_COLLECTION_EVERY)
            await asyncio.to_thread(self.settle)


_heap: Heap | None = None


async def keep() -> None:
    """`Heap.keep` in the exporter's process (cli.serve runs it); returns at once elsewhere."""
    if _heap is not None:
        await _heap.keep()


def tune_runtime() -> None:
    """Set the cyclic collector's pace, freeze what survives its collections, and hand the GIL
    round sooner; once per exporter process (cli, bench)."""
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
