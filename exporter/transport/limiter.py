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

From PAIRS_FROM requests a second, writes go in pairs: a pair takes two slots, and its second
write goes with its first (any write within a slot of it), so the loop wakes once for two
requests. Each wake-up from idle costs the process CPU of its own (~0.15 ms on the 2-core
machines of bench/README.md).

Two bounds on top: the window (the last floor(rate) writes span at least a second, and a slot
more where writes pair), and the spacing (writes, or pairs, at least SPACING of their slots
apart). On pace, a window's writes span exactly a second, so any arrival jitter can make the
provider count one extra in a second, and only jitter of a whole slot a second one (the HTTP
test allows the one). A pair arrives together, so its window is a slot longer: the same one
extra at most, for one slot a second of the budget (under 2 % from PAIRS_FROM). Behind, writes
catch up at up to 1/SPACING times the rate, never in one burst.
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
# The rate from which writes go in pairs: there the slot a second that a pair's longer window
# costs is under 2 % of the budget (at 40 a second, paired, 2.5 %).
PAIRS_FROM: Final = 50.0


class RequestBudget:
    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._slot = 1.0 / rate
        self._count = max(1, math.floor(rate))
        # Slots a write takes (two: it opens a pair), and whether a pair's second may go.
        self._step = 2 if rate >= PAIRS_FROM else 1
        self._open = False
        # The span the last `count` writes must cover: a second, or 1/rate under 1 a second;
        # a slot more where a pair's two writes arrive together.
        self._window = max(1.0, self._count / rate) + (self._slot if self._step == 2 else 0.0)
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
        window = self._window - (now - sent[0]) if len(sent) == self._count else 0.0
        if self._paired(now):
            return max(0.0, window)
        spaced = SPACING * self._step * self._slot - (now - sent[-1])
        return max(0.0, self._next - now, spaced, window)

    def count(self, now: float) -> None:
        """A request was written at `now`: a pair's second, or it took the pace's slots (and
        opens a pair), or, when the pace was more than CREDIT behind (no work came, the loop
        stalled), it starts the pace again."""
        if self._paired(now):
            self._open = False
        else:
            taken = self._next if self._next >= now - self._credit else now
            self._next = taken + self._step * self._slot
            self._open = self._step == 2
        self._sent.append(now)

    def _paired(self, now: float) -> bool:
        """A write at `now` is the open pair's second: within a slot of its first."""
        return self._open and now - self._sent[-1] < self._slot

    def carry(self, other: RequestBudget) -> None:
        """Go on from `other`'s writes (a target rebuilt by a reload): its last second counts,
        or the rebuilt target's first second could send up to twice the budget."""
        self._sent.extend(other._sent)
        self._next = max(self._next, other._next)
        self._open = other._open and self._step == 2
