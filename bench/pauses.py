"""What a server's event loop waited for while it was scraped: for bench/serve.py and bench.churn.

A wall-clock p99 on a shared machine mixes the server's own pauses with the times the machine
did not run it. Each lag of the loop (a TICK sleep woken LAG or more late) is put down, by the
CPU time used meanwhile, to one of:

- `not_running`: the process used less than half the lag's wall time (other processes ran);
- `loop`: the main thread used half of it or more (a long step, or a collection, on the loop);
- `thread`: the process ran and the main thread did not (a render or a collection in a thread
  holding the GIL, or the main thread waiting on a lock).

The cyclic collector's collections are counted per generation, with the CPU time of the longest
and of all. `Pauses.line()` says all that since the last line, and starts counting afresh.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import NoReturn

TICK = 0.01
LAG = 0.05
KINDS = ("not_running", "loop", "thread")


class Pauses:
    """Counts loop lags by kind and the cyclic collector's collections, from `install()` on."""

    def __init__(self) -> None:
        self._started: dict[int, float] = {}  # thread -> its CPU time at a collection's start
        self.reset()

    def reset(self) -> None:
        self.lags = dict.fromkeys(KINDS, 0)
        self.worst_lag_ms = {kind: 0.0 for kind in KINDS}
        self.collections = [0] * len(gc.get_threshold())
        self.longest_collection_ms = [0.0] * len(gc.get_threshold())
        self.collection_cpu_ms = 0.0

    def install(self) -> None:
        gc.callbacks.append(self._hook)

    def _hook(self, phase: str, info: dict[str, int]) -> None:
        # Called on the collecting thread: its own CPU time is the collection's.
        thread = threading.get_ident()
        if phase == "start":
            self._started[thread] = time.thread_time()
            return
        started = self._started.pop(thread, None)
        if started is None:
            return
        cpu_ms = (time.thread_time() - started) * 1000
        generation = info["generation"]
        self.collections[generation] += 1
        self.collection_cpu_ms += cpu_ms
        longest = self.longest_collection_ms
        longest[generation] = max(longest[generation], cpu_ms)

    async def watch(self) -> NoReturn:
        """Sleep TICK over and over on the loop; count each wake-up LAG or more late."""
        while True:
            wall, main, process = time.perf_counter(), time.thread_time(), time.process_time()
            await asyncio.sleep(TICK)
            wall = time.perf_counter() - wall
            if wall - TICK < LAG:
                continue
            if time.process_time() - process < wall / 2:
                kind = "not_running"
            elif time.thread_time() - main >= wall / 2:
                kind = "loop"
            else:
                kind = "thread"
            self.lags[kind] += 1
            self.worst_lag_ms[kind] = max(self.worst_lag_ms[kind], (wall - TICK) * 1000)

    def line(self) -> str:
        """`pauses ...`: the counts since the last line; then counting starts afresh."""
        lags = " ".join(
            f"lags_{kind}={self.lags[kind]} worst_{kind}_ms={self.worst_lag_ms[kind]:.0f}"
            for kind in KINDS
        )
        collections = "/".join(str(n) for n in self.collections)
        longest = "/".join(f"{ms:.1f}" for ms in self.longest_collection_ms)
        text = (
            f"pauses  {lags} collections(gen0/1/2)={collections} "
            f"longest_collection_cpu_ms={longest} collections_cpu_ms={self.collection_cpu_ms:.0f}"
        )
        self.reset()
        return text
