"""The request budget of one target: the one limiter of provider calls.

Guarantee: at most floor(rate) requests in any one-second window as they are written, which
is where the provider starts counting (for a rate under 1, one per 1/rate seconds); and while
there is more work than budget, at least 0.9 of floor(rate) a second go out (simulated, with
wake-ups 0-3 ms late: 1.00 at 10 requests/s, 0.93 at 100).

`admit` runs right before a request is written (aiohttp's headers-sent hook, or before `send`
for another transport) and returns when the request may go: the window of the last
floor(rate) writes has room, and a slot (1/rate) passed since the last write, less while the
last second holds fewer than floor(rate) writes (down to SPACING of a slot when it holds
none). On pace, writes are a slot apart, so arrival jitter has a whole slot to move one
before the provider counts an extra; behind, they catch up. The window alone replays its
first second: 10 writes in the first half of every second at 10 requests/s, and the
simulator counted 12 in one second.
Callers go in turn (a FIFO lock): left to whichever of 8 sleepers woke first, 5 % of calls
waited 22 slots or more, and GPU gaps ran past their interval (scale 3, 730 of 28,172).

Why a window of writes: aiolimiter's token bucket counts each wait from the wake-up before
it, so every late wake-up of a loaded loop is lost for good (87 of 100 requests/s beside a test
run); counted from the writes a second ago, a late write is made up within the next second.
Counted at the write, not when a worker was let go: an event-loop pause between the two let
33-36 reach the provider in one second at 30 requests/s while the sender counted 30.
"""

from __future__ import annotations

import asyncio
import math
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Final

# Writes are at least this share of a slot apart: what a stall held back goes out at up to
# twice the rate, not at once, where jitter at the provider's second boundary counted the
# burst and the one a second later together (13 in a second at 10 requests/s after a 1.5 s
# stall).
SPACING: Final = 0.5


class RequestBudget:
    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.rate = rate
        self._slot = 1.0 / rate
        count = max(1, math.floor(rate))
        # The window the last `count` writes must span: a second, or 1/rate under 1 a second.
        self._window = max(1.0, count / rate)
        self._clock = clock
        self._sleep = sleep
        self._count = count
        self._sent: deque[float] = deque(maxlen=count)
        self._turn = asyncio.Lock()

    async def admit(self) -> None:
        """Wait until a request may be written now, and count it as written."""
        async with self._turn:
            while (wait := self._wait(self._clock())) > 0:
                await self._sleep(wait)
            self._sent.append(self._clock())

    def _wait(self, now: float) -> float:
        sent = self._sent
        if not sent:
            return 0.0
        # A slot apart on pace; SPACING of one while the last second holds fewer writes.
        recent = sum(1 for t in sent if t > now - self._window)
        spaced = sent[-1] + max(SPACING, recent / self._count) * self._slot - now
        window = sent[0] + self._window - now if len(sent) == self._count else 0.0
        return max(spaced, window)


# Per (event loop, provider, target): the budget its clients share, while one is in use.
_budgets: weakref.WeakValueDictionary[tuple[int, str, str], RequestBudget] = (
    weakref.WeakValueDictionary()
)


def budget_of(provider: str, target: str, rate: float) -> RequestBudget:
    """The target's budget: a target rebuilt by a reload goes on with the writes of the last
    second, or its first second would add up to `rate` more (41 in one second at 20/s)."""
    try:
        loop: object = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    key = (id(loop), provider, target)
    budget = _budgets.get(key)
    if budget is None or budget.rate != rate:
        fresh = RequestBudget(rate)
        if budget is not None:
            fresh._sent.extend(budget._sent)
        budget = _budgets[key] = fresh
    return budget
