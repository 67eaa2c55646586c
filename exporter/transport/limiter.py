"""The request budget of one target: when its next request may be written.

Guarantee: at most floor(rate) requests in any one-second window as they are written, which is
where the provider starts counting (for a rate under 1, one per 1/rate seconds); and while
there is more work than budget, at least 0.9 of floor(rate) a second go out, even when the
loop wakes up late or stalls (tests/test_rate_budget.py).

A request may be written once the window of the last floor(rate) writes has room and a slot
(1/rate) has passed since the last write, less while the last window holds fewer than
floor(rate) writes, down to SPACING of a slot when it holds none. On pace, writes are a slot
apart, so arrival jitter has a whole slot to move one before the provider counts an extra;
behind, they catch up at up to 1/SPACING times the rate, never in one burst. The window is
counted from the writes themselves, not from wake-ups, so a late wake-up is made up within
the next window instead of being lost.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Final

# Writes are at least this share of a slot apart: what a stall held back goes out at up to
# twice the rate, which jitter at the provider's second boundary cannot count as one burst.
SPACING: Final = 0.5


class RequestBudget:
    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._slot = 1.0 / rate
        self._count = max(1, math.floor(rate))
        # The span the last `count` writes must cover: a second, or 1/rate under 1 a second.
        self._window = max(1.0, self._count / rate)
        self._sent: deque[float] = deque(maxlen=self._count)

    def wait(self, now: float) -> float:
        """Seconds until a request may be written (0: now)."""
        sent = self._sent
        if not sent:
            return 0.0
        recent = sum(1 for t in sent if t > now - self._window)
        spaced = sent[-1] + max(SPACING, recent / self._count) * self._slot - now
        window = sent[0] + self._window - now if len(sent) == self._count else 0.0
        return max(0.0, spaced, window)

    def count(self, now: float) -> None:
        """A request was written at `now`."""
        self._sent.append(now)

    def carry(self, other: RequestBudget) -> None:
        """Go on from `other`'s writes (a target rebuilt by a reload): its last second counts,
        or the rebuilt target's first second could send up to twice the budget."""
        self._sent.extend(other._sent)
