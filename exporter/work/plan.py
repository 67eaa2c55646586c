"""What a target's tiers cost at its current job and pod counts, and how they fit the budget.

A tier costs `calls` requests per read (units x its items; the fast tier's include the job
list's pages) every `interval`. The plan needs the sum of calls / interval requests per second
(`training_exporter_budget_required_requests_per_second`). When that is more than the budget,
tiers stretch, slowest first: each up to MAX_STRETCH times its interval before the next faster
one stretches at all, so GPU utilisation is the last to age; if every tier is stretched that
far and the plan still does not fit, they all stretch by the same factor. `budget` is this
replica's share of the account's `requests_per_second` (1/N of it with `--shard.count N`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

# 4x: a 15 m slow tier read at worst hourly, a 5 m medium one every 20 m, before GPU
# utilisation gives up any of its freshness.
MAX_STRETCH: Final = 4.0
# Reads are released and due EARLY of their interval apart (`queue`), so that the wait for a
# budget slot (up to max_concurrency / budget) does not carry a gap past the interval.
EARLY: Final = 0.97
# The share of what the limiter sends that the tiers' reads may ask for; the rest absorbs
# retries, first reads of new jobs and final reads (`bench.budget`).
ASK: Final = 0.96
# Plans are made to fit HEADROOM of the budget: read EARLY apart, they then ask ASK of it.
HEADROOM: Final = ASK * EARLY


@dataclass(frozen=True, slots=True)
class Plan:
    # Tier -> the requests one read of it costs (its units' items; the fast tier's listing).
    requests_per_read: Mapping[str, int]
    configured: Mapping[str, float]
    effective: Mapping[str, float]
    # Requests per second, None: unlimited.
    budget: float | None
    # Requests per second the tiers need at their configured intervals.
    required: float
    # What the plan was made to fit: HEADROOM of the budget.
    room: float | None = None
    # The longest a call waits for its budget slot: behind every other worker's.
    slot_wait: float = 0.0

    @property
    def exceeds(self) -> bool:
        """The configured intervals do not fit: tiers are stretched."""
        return self.room is not None and self.required > self.room

    def describe(self) -> dict[str, object]:
        return {
            "required_rps": round(self.required, 3),
            "budget_rps": self.budget,
            "slot_wait_seconds": round(self.slot_wait, 1),
            "requests_per_read": dict(self.requests_per_read),
            "intervals": {t: round(s, 1) for t, s in self.effective.items()},
        }


def _rate(calls: Mapping[str, int], intervals: Mapping[str, float]) -> float:
    return sum(n / intervals[t] for t, n in calls.items() if n)


def make_plan(
    calls: Mapping[str, int],
    configured: Mapping[str, float],
    budget: float | None,
    workers: int = 1,
) -> Plan:
    """The plan for `calls` per tier under `budget`, made by `workers` concurrent callers."""
    required = _rate(calls, configured)
    effective = dict(configured)
    room, slot_wait = None, 0.0
    if budget is not None:
        # The limiter sends floor(rate) a second (`transport.limiter`): 3 of a 3.33 share.
        usable = math.floor(budget) if budget >= 1 else budget
        room = usable * HEADROOM
        slot_wait = workers / budget
        if required > room:
            effective = _stretch(calls, configured, room)
    return Plan(dict(calls), dict(configured), effective, budget, required, room, slot_wait)


def _stretch(
    calls: Mapping[str, int], configured: Mapping[str, float], room: float
) -> dict[str, float]:
    effective = dict(configured)
    costly = [t for t, n in calls.items() if n]
    for tier in sorted(costly, key=lambda t: configured[t], reverse=True):
        others = _rate({t: n for t, n in calls.items() if t != tier}, effective)
        left = room - others
        needed = calls[tier] / left if left > 0 else math.inf
        effective[tier] = min(needed, configured[tier] * MAX_STRETCH)
        if needed <= effective[tier]:
            return effective
    factor = _rate(calls, effective) / room
    return {t: s * factor if t in costly else s for t, s in effective.items()}
