"""The request budget: at most `rate` requests a second to one provider account.

`acquire` runs before an attempt is sent; `admit` runs as its request is written (the HTTP
transport's headers-sent hook), which is where the provider starts counting.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Final

# How far behind the budget's grid may run and be caught up: the event-loop pauses of a busy
# exporter (130-250 ms at 100k series); a longer stall's slots are given up, or the catch-up
# would go on as a burst every second for as long as the stall lasted.
CATCH_UP: Final = 0.25


class RequestBudget:
    """At most `rate` requests a second, paced on a grid of 1/rate slots.

    aiolimiter's one-token bucket counts each wait from the wake-up before it, so every late
    wake-up of a loaded event loop is lost for good: at 100 requests/s on this 2-core machine
    it gave 98 idle and 87 beside a test run. Slots here follow a fixed grid (`acquire`), so
    a late wake-up costs nothing later. No more than floor(rate) requests go
    out in any second even after a stall wakes several at once: `admit` keeps a window of the
    last send times, and runs as the request is written (aiohttp's headers-sent hook), not when
    its slot came. Checked at the slot, an event-loop pause between the two let 33-36 reach the
    provider in one second at 30 requests/s while the sender counted 30. Writes are also at
    least half a slot apart: the slots a stall let pass go out at twice the rate, not at once
    and again at once a second later, when any jitter at the provider's second boundary moved
    the whole burst (13 in a second at 10 requests/s after a 1.5 s stall). That leaves one of
    the provider's `rate + 1` for the jitter between writing and arriving.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._interval = 1.0 / rate
        self._clock = clock
        self._next = clock()
        self._sent: deque[float] = deque(maxlen=max(1, math.floor(rate)))
        # Callers of `acquire` in the order they came; the first waits for the slot.
        self._line: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        """The grid's next slot, taken once it is due; slots more than CATCH_UP past are given
        up. Not reserved ahead (after a stall every waiting worker would hold a slot long past,
        and all would go at once), but in turn: only the first in line waits for the slot.
        Left to whichever of 8 sleepers woke first, (7/8)^22 = 5 % of calls would wait 22
        slots or more: at scale 3, 730 of 28,172 GPU gaps ran past the interval."""
        turn = asyncio.get_running_loop().create_future()
        line = self._line
        line.append(turn)
        try:
            if line[0] is not turn:
                await turn
            while (wait := self._take_slot()) > 0:
                await asyncio.sleep(wait)
        finally:
            line.remove(turn)
            if line and not line[0].done():
                line[0].set_result(None)

    def _take_slot(self) -> float:
        """0 when the next slot is due (and now taken), else the seconds until it is."""
        now = self._clock()
        slot = max(self._next, now - CATCH_UP)
        if slot > now:
            return slot - now
        self._next = slot + self._interval
        return 0.0

    async def admit(self) -> None:
        """Right before the request is written: wait until the last second holds room for it,
        and half a slot has passed since the last one went."""
        windowed = False
        while True:
            now = self._clock()
            spaced, window = self._waits(now)
            if max(spaced, window) <= 0:
                break
            windowed = windowed or window > 0
            await asyncio.sleep(max(spaced, window))
        self._sent.append(now)
        if windowed:
            # The window, not the grid, set this one's time: later slots follow it, or every
            # second would repeat the last one's burst.
            self._next = max(self._next, now + self._interval)

    def _waits(self, now: float) -> tuple[float, float]:
        sent = self._sent
        spaced = sent[-1] + self._interval / 2 - now if sent else 0.0
        window = sent[0] + 1.0 - now if len(sent) == sent.maxlen else 0.0
        return spaced, window
