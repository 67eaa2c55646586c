"""What the backfill driver asks of a provider: its jobs in a window, and their history.

A reader is built per target around the provider's own client (`LimitedClient`: the request
budget, retries, error handling and reply bounds of the live path) and its own mapping, so
names, labels, units and ratios are the live exposition's. The driver knows nothing of
providers; it walks `Task`s, and a task's key is what the resume state records as written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from exporter.transport.gate import Gate

# The longest one backfill call may take, its retries included.
CALL_DEADLINE: Final = 300.0


def call_deadline() -> float:
    """The deadline of a backfill call made now (the monotonic clock)."""
    return time.monotonic() + CALL_DEADLINE


# JSON-able facts a reader keeps about a job between its tasks (and between runs).
Facts = dict[str, Any]


@dataclass(frozen=True, slots=True)
class JobRef:
    """A job in the window: `data` is whatever the reader needs to read it again (JSON-able,
    it is stored in the resume state so a resumed run reads the same jobs)."""

    job_id: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Task:
    """One provider call's worth of history: `key` is unique within its job; `unit` is what
    the call is about below the job (an Alaya pod), `item` what it reads (a metric type)."""

    key: str
    item: str
    start: int
    end: int
    unit: str = ""


@dataclass(slots=True)
class Series:
    """Points of one series: `name` and labels exactly as the live exposition writes them."""

    name: str
    label_names: tuple[str, ...]
    label_values: tuple[str, ...]
    points: list[tuple[float, float]] = field(default_factory=list)


@dataclass(slots=True)
class Described:
    """A job's first task: its info series over the window, and facts its windows need."""

    series: list[Series]
    facts: Facts


class HistoryUnavailable(Exception):
    """Nothing is kept for this task (the provider answers 404): written as empty."""


class HistoryReader(Protocol):
    provider: str
    target: str
    gate: Gate

    def retention(self) -> tuple[float, str] | None:
        """Seconds of history the provider keeps and where that figure comes from; None when
        unknown."""
        ...

    async def jobs(self, since: float, until: float) -> Sequence[JobRef]:
        """Every job whose life overlaps [since, until], finished ones included."""
        ...

    async def describe(self, job: JobRef, since: float, until: float) -> Described: ...

    def tasks(self, job: JobRef, facts: Facts, since: float, until: float) -> list[Task]:
        """The job's metric windows, in time order per item; no calls."""
        ...

    async def read(self, job: JobRef, facts: Facts, task: Task) -> list[Series]: ...

    async def close(self) -> None: ...
