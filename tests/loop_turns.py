"""How long the event loop goes without a turn while some work runs, in the thread's CPU time."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")
# How often the ticker asks for a turn: often enough to see each of the loop's steps, and
# seldom enough that its own CPU does not count as the work's.
TICK = 0.001


async def longest_turn(work: Awaitable[T]) -> tuple[float, float, T]:
    """(the longest CPU time the loop spent away from a ticker while `work` ran, the CPU time
    `work` took on this thread, its result). The collector is off meanwhile: a full collection
    of the test process's heap can take one turn longer than the work's own."""
    turns: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.thread_time()
        while not done.is_set():
            await asyncio.sleep(TICK)
            now = time.thread_time()
            turns.append(now - last)
            last = now

    gc.disable()
    try:
        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)  # the ticker's clock starts before the work
        started = time.thread_time()
        result = await work
        whole = time.thread_time() - started
        done.set()
        await task
    finally:
        gc.enable()
    return max(turns), whole, result
