"""The request budget of one target: when its next request may be written.

Guarantee: at most floor(rate) requests in any one-second window as they are written, which is
where the provider starts counting (for a rate under 1, one per 1/rate seconds); and while
there is more work than budget, about floor(rate) a second go out even when every wake-up of
the loop comes milliseconds late, and at least 0.9 of it when the loop stalls
(tests/transport/test_rate_budget.py).

Writes keep a pace: each takes the next slot of a grid 1/rate apart, and the slot after it is
the next write's earliest time, however late the write itself went. A wake-up that came late
shortens the wait for the next write instead of pushing every later slot back (measured from
the last write, each late wake-up was lost: bench/README.md, issue 38). A pace more than CREDIT
behind (no work came, or the loop stalled) starts again from the write that finds it so: a
longer stall's writes are not made up, and an idle target does not save up a burst.

Two bounds on top: the window (the last floor(rate) writes span at least a second), and the
spacing (writes at least SPACING of a slot apart). On pace, writes are a slot apart and a
window's writes span exactly a second, so any arrival jitter can make the provider count one
extra in a second, and only jitter of a whole slot a second one (the HTTP test allows the
one); behind, they catch up at up to 1/SPACING times the rate, never in one burst.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Final

# Writes are at least this share of a slot apart: what a stall held back goes out at up to
# twice the rate, which jitter at the provider's second boundary cannot count as one burst.
SPACING: Final = 0.5
# How far, as a share of the window, the pace may fall behind the writes and still be made
# up: a loop's late wake-ups and its short stalls (renders, collections), not a pause.
CREDIT: Final = 0.25


class RequestBudget:
    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._slot = 1.0 / rate
        self._count = max(1, math.floor(rate))
        # The span the last `count` writes must cover: a second, or 1/rate under 1 a second.
        self._window = max(1.0, self._count / rate)
        self._credit = CREDIT * self._window
        self._sent: deque[float] = deque(maxlen=self._count)
        # The pace's next slot: the earliest the next write may go, by the pace alone.
        self._next = -math.inf

    def wait(self, now: float) -> float:
        """Seconds until a request may be written (0: now)."""
        sent = self._sent
        if not sent:
            return 0.0
        # As spans from the writes, the way the provider counts them: (a + 1.0) - a can
        # round below 1.0, and a write at sent[0] + 1.0 would then count in sent[0]'s second.
        spaced = SPACING * self._slot - (now - sent[-1])
        window = self._window - (now - sent[0]) if len(sent) == self._count else 0.0
        return max(0.0, self._next - now, spaced, window)

    def count(self, now: float) -> None:
        """A request was written at `now`: it took the pace's slot, or, when the pace was more
        than CREDIT behind (no work came, the loop stalled), it starts the pace again."""
        taken = self._next if self._next >= now - self._credit else now
        self._next = taken + self._slot
        self._sent.append(now)

    def carry(self, other: RequestBudget) -> None:
        """Go on from `other`'s writes (a target rebuilt by a reload): its last second counts,
        or the rebuilt target's first second could send up to twice the budget."""
        self._sent.extend(other._sent)
        self._next = max(self._next, other._next)
