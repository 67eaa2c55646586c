"""Whether a target's calls may go out now.

Every attempt passes the gate right before it is sent (after its budget slot, so calls queued
before the gate closed do not slip through):
- a `Retry-After` pauses the whole target for that long (at most MAX_PAUSE), not only the call
  that got it: a service asking for a day's rest would otherwise get a request every round;
- refused credentials (a `Failure` that `blocks`) close it until the runner's next round tries
  the job list again: with 24 calls per AIHC job, the rest of a round would be refused too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

# The longest a Retry-After pauses a target: a day's quota reset is tried again hourly.
MAX_PAUSE = 3600.0


class Gate:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.paused_until = 0.0
        self.blocked = False
        # Attempts let through, ever: what the runner measures its achieved rate with.
        self.sent = 0
        self._opened = asyncio.Event()
        self._opened.set()

    @property
    def open(self) -> bool:
        return not self.blocked and self._clock() >= self.paused_until

    @property
    def paused(self) -> bool:
        return self._clock() < self.paused_until

    def pause(self, seconds: float) -> float:
        """Pause for `seconds` (capped at MAX_PAUSE) unless already paused longer; the pause."""
        until = self._clock() + min(seconds, MAX_PAUSE)
        if until > self.paused_until:
            self.paused_until = until
        return self.paused_until - self._clock()

    def block(self) -> None:
        self.blocked = True
        self._opened.clear()

    def unblock(self) -> None:
        self.blocked = False
        self._opened.set()

    async def wait_open(self) -> None:
        while not self.open:
            if self.blocked:
                await self._opened.wait()
            else:
                await asyncio.sleep(max(0.0, self.paused_until - self._clock()))
