"""What every provider client offers the scheduler."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from exporter.model import PollResult


@dataclass(frozen=True, slots=True)
class PollContext:
    """Facts about the poll being run."""

    # time.monotonic() by which the poll should be over (retries stop before it).
    deadline: float
    # time.time() at the poll's start: the `now` of metric windows.
    started_at: float
    # Whether a job of this provider belongs to this replica (sharding); all by default.
    owns_job: Callable[[str], bool] = lambda job_id: True


class Provider(Protocol):
    """One configured target: `poll()` reads the provider once and says what it learnt."""

    provider: str
    target: str

    async def poll(self, context: PollContext) -> PollResult: ...

    async def close(self) -> None: ...

    def describe(self) -> dict[str, str]:
        """Non-secret facts for the landing page (endpoint, pool, job count)."""
        ...
