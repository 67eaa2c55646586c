"""State sets (job statuses, pod phases): one series per state seen, 1 for the current one.

Every state seen so far gets a series in every object's set, so a set keeps its shape while
states come and go. Upstream chooses the strings, so the set is bounded: a `Seen` holds at
most `MAX_STATES` states; past that, a new state is exported as `other` (the set's last
state from then on, so every object's set still has its 1) and logged by the target's
`FoldLog`, at most once a minute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from exporter.providers.kit.folds import OTHER, FoldLog

MAX_STATES: Final = 64


class Seen:
    """Values seen so far, in order: known ones first, then new ones as they appear, then
    `other` once one did not fit."""

    def __init__(
        self,
        known: Iterable[str],
        limit: int = MAX_STATES,
        *,
        label: str = "state",
        folds: FoldLog | None = None,
    ) -> None:
        self._values: dict[str, None] = dict.fromkeys(known)
        self._limit = max(limit, len(self._values) + 1)
        self._tuple = tuple(self._values)
        self._label = label
        self._folds = folds

    def add(self, value: str) -> str:
        """Note `value`; the state it is exported as: itself, or `other` past the cap."""
        if not value or value in self._values:
            return value
        if len(self._values) < self._limit - 1:
            self._put(value)
            return value
        if OTHER not in self._values:
            self._put(OTHER)
        if self._folds is not None:
            self._folds.folded(self._label, (value,), self._limit)
        return OTHER

    def _put(self, value: str) -> None:
        self._values[value] = None
        self._tuple = tuple(self._values)

    @property
    def values(self) -> tuple[str, ...]:
        return self._tuple


def fold(states: Sequence[str], current: str) -> str:
    """The state an object exports: its own, or `other` when its set is full without it (a
    set that folds holds `other`; a fixed set of known states exports an unknown one as it
    is)."""
    if not current or current in states or OTHER not in states:
        return current
    return OTHER


def with_current(states: Sequence[str], current: str) -> Sequence[str]:
    """The states to export for one object: `states`, plus its own when they lack it."""
    if current and current not in states:
        return (*states, current)
    return states
