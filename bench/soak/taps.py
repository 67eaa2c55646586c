"""The taps in front of the simulator, on a thread and an event loop of their own.

A tap timestamps each connection and request as its bytes go by; on the soak's own loop,
which parses scrapes and fetches pages, a busy moment of that loop would delay the bytes and
their timestamps by tens of milliseconds, seconds at 150 x. On a thread of their own (the
interpreter switches threads every half millisecond here) the taps keep time and pace.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable
from contextlib import AsyncExitStack

from exporter.simulator.tap import Tap, tapped

SWITCH_INTERVAL = 0.0005


class TapThread:
    def __init__(self, upstream: str, names: tuple[str, ...], clock: Callable[[], float]):
        self.upstream, self.names, self.clock = upstream, names, clock
        self.taps: dict[str, Tap] = {}
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="soak-taps", daemon=True)

    def start(self) -> dict[str, Tap]:
        sys.setswitchinterval(SWITCH_INTERVAL)
        self._thread.start()
        if not self._ready.wait(30):
            raise SystemExit("the taps did not start")
        return self.taps

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        async with AsyncExitStack() as stack:
            for name in self.names:
                self.taps[name] = await stack.enter_async_context(tapped(self.upstream, self.clock))
            self._ready.set()
            await self._stop.wait()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
