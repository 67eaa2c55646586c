"""An event loop on simulated time: sleeps and timeouts return at once, the clock jumps to the
next timer. Scheduling logic runs on it as it would run for hours, in milliseconds, with no
sleeps and no tolerance for a loaded machine. Thread work (`asyncio.to_thread`) runs inline,
so the clock never jumps while a thread works."""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")
START = 1000.0


class _Selector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualLoop | None = None

    def select(self, timeout: float | None = None) -> list[Any]:
        # With only the loop's own wake-up pipe registered (no socket, and thread work runs
        # inline, so no thread writes to it), nothing can be ready: no system call is made.
        ready: list[Any] = super().select(0) if len(self.get_map()) > 1 else []
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise RuntimeError("simulated time: nothing scheduled, nothing ready (a deadlock)")
        assert self.loop is not None
        # At least one step of the float: a timer a rounding error away must come due.
        self.loop.now = max(self.loop.now + timeout, math.nextafter(self.loop.now, math.inf))
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        selector = _Selector()
        super().__init__(selector)
        selector.loop = self
        self.now = START

    def time(self) -> float:
        return self.now

    def run_in_executor(  # type: ignore[override]
        self, executor: Executor | None, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future


def simulate(main: Callable[[VirtualLoop], Coroutine[Any, Any, T]]) -> T:
    """Run `main(loop)` on a fresh simulated loop and return what it returns."""
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(main(loop))
    finally:
        loop.close()
