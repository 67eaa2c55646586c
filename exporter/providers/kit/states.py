"""State sets (job statuses, pod phases): one series per state seen, 1 for the current one.

Every state seen so far gets a series in every object's set, so a set keeps its shape while
states come and go. Upstream chooses the strings, so the set is bounded: past `MAX_STATES`, a
new state is not added for everyone, but its object still exports its own current state
(`with_current`), so no object loses its 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

MAX_STATES: Final = 64


class Seen:
    """Values seen so far, in order: known ones first, then new ones as they appear."""

    def __init__(self, known: Iterable[str], limit: int = MAX_STATES) -> None:
        self._values: dict[str, None] = dict.fromkeys(known)
        self._limit = max(limit, len(self._values))
        self._tuple = tuple(self._values)

    def add(self, value: str) -> None:
        if value and value not in self._values and len(self._values) < self._limit:
            self._values[value] = None
            self._tuple = tuple(self._values)

    @property
    def values(self) -> tuple[str, ...]:
        return self._tuple


def with_current(states: Sequence[str], current: str) -> Sequence[str]:
    """The states to export for one object: `states`, plus its own when the set is full."""
    if current and current not in states:
        return (*states, current)
    return states
