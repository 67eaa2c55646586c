"""Whether, and when, a target's next request may be sent: the one check every attempt
passes before it takes a connection or is signed, so a call that will not be sent costs the
provider nothing, not even a connection.

- the request budget (`limiter`): the provider counts at the write, which follows admission at
  once (an attempt is signed and written as soon as it is admitted);
- a `Retry-After` pauses the whole target for that long (at most MAX_PAUSE), not only the call
  that got it: a service asking for a day's rest would otherwise get a request every round;
- refused credentials (a `Failure` that `blocks`) close it until the runner's next round tries
  the job list again: the rest of the round would be refused too.

Attempts go in the order they asked (a FIFO lock). One whose turn would come after its deadline
is dropped unsent (`CallDropped`): by then its item is due again, or its round over.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from exporter.transport.iface import CallDropped, CallSkipped
from exporter.transport.limiter import RequestBudget

# The longest a Retry-After pauses a target: a day's quota reset is tried again hourly.
MAX_PAUSE = 3600.0
# The shortest wait slept: asyncio runs a timer due within its clock's resolution at once,
# so a wait of a rounding error would be asked for again and again without time passing.
MIN_SLEEP = 1e-6


class Gate:
    def __init__(
        self,
        rate: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """`rate`: requests per second, None for no budget."""
        self.budget = RequestBudget(rate) if rate else None
        self._clock = clock
        self._sleep = sleep
        self.paused_until = 0.0
        self.blocked = False
        # Attempts let through, ever: what the backfill reports as its request count.
        self.sent = 0
        self._turn = asyncio.Lock()
        self._unblocked = asyncio.Event()
        self._unblocked.set()

    @property
    def open(self) -> bool:
        return not self.blocked and not self.paused

    @property
    def paused(self) -> bool:
        return self._clock() < self.paused_until

    async def admit(self, deadline: float | None = None) -> None:
        """Return once a request may be sent now, counted as sent. `CallSkipped` while
        the credentials are refused; `CallDropped` when its turn (the budget's slot, the end
        of a pause) would come after `deadline` (the gate's clock)."""
        async with self._turn:
            while True:
                if self.blocked:
                    raise CallSkipped
                now = self._clock()
                budget = self.budget.wait(now) if self.budget is not None else 0.0
                wait = max(budget, self.paused_until - now)
                if wait <= 0:
                    break
                if deadline is not None and now + wait > deadline:
                    raise CallDropped
                await self._sleep(max(wait, MIN_SLEEP))
            if self.budget is not None:
                self.budget.count(now)
            self.sent += 1

    def record(self) -> None:
        """A write that was not admitted (the transport sending a request again on a new
        connection when a pooled one was closed under it): counted, for the provider counted
        it too."""
        if self.budget is not None:
            self.budget.count(self._clock())
        self.sent += 1

    def pause(self, seconds: float) -> float:
        """Pause for `seconds` (capped at MAX_PAUSE) unless already paused longer; the pause."""
        until = self._clock() + min(seconds, MAX_PAUSE)
        if until > self.paused_until:
            self.paused_until = until
        return self.paused_until - self._clock()

    def block(self) -> None:
        self.blocked = True
        self._unblocked.clear()

    def unblock(self) -> None:
        self.blocked = False
        self._unblocked.set()

    async def resumed(self) -> None:
        """Return once a Retry-After pause is over."""
        await self._sleep(max(0.0, self.paused_until - self._clock()))

    async def unblocked(self) -> None:
        """Return once the credentials may be tried again (the next round's listing)."""
        await self._unblocked.wait()

    def carry(self, other: Gate) -> None:
        """Go on from `other` (the same target before a reload): its writes and its pause."""
        if self.budget is not None and other.budget is not None:
            self.budget.carry(other.budget)
        self.paused_until = max(self.paused_until, other.paused_until)
