"""One full read of a target: the job list, then every item of every unit once.

Not how the exporter runs (its runner reads each tier at its own interval); this is what tests
and `bench/poll_cycle.py` use to see, in one call, every part a target's jobs have and what
reading them all costs. It lives here, not in the package, because only they need it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from exporter.model import FINAL_TIER, Failed, PartOutcome, Reading, Update
from exporter.providers.base import (
    PartSamples,
    PollContext,
    Provider,
    ReadContext,
    ReadResult,
    Unit,
)


@dataclass(slots=True)
class PollResult:
    """Every part of every job from one full read of a target."""

    jobs: dict[str, dict[str, PartOutcome]] = field(default_factory=dict)
    listed: bool = True
    # Calls that failed after their retries; any makes `ok` False.
    failed_requests: int = 0

    def put(self, job_id: str, part: str, outcome: PartOutcome) -> None:
        self.jobs.setdefault(job_id, {})[part] = outcome

    @property
    def ok(self) -> bool:
        return self.listed and self.failed_requests == 0

    def update(self) -> Update:
        """The same as an update that names exactly these jobs and parts."""
        parts = {job: frozenset(outcomes) for job, outcomes in self.jobs.items()}
        return Update(parts, self.listed, {job: dict(o) for job, o in self.jobs.items()})


async def read_all(provider: Provider, context: PollContext, workers: int = 8) -> PollResult:
    listing = await provider.list_jobs(context)
    result = PollResult(listed=listing.listed, failed_requests=listing.failed_requests)
    for job_id, parts in listing.readings.items():
        for part, outcome in parts.items():
            result.put(job_id, part, _reading(outcome, "fast"))
    calls: list[tuple[Unit, str, str]] = [
        (unit, item, provider.tiers.tier_of(item)) for unit in listing.units for item in unit.items
    ]
    calls += [(unit, item, FINAL_TIER) for unit in listing.finals for item in unit.items]
    pending = iter(calls)
    gone: set[str] = set()

    async def work() -> None:
        for unit, item, tier in pending:
            read = await provider.read(
                unit, item, ReadContext(deadline=context.deadline, now=context.started_at)
            )
            _take(result, read, tier, gone)

    await asyncio.gather(*(work() for _ in range(workers)))
    for job_id in gone:
        result.jobs.pop(job_id, None)
    return result


def _take(result: PollResult, read: ReadResult, tier: str, gone: set[str]) -> None:
    if read.failed:
        result.failed_requests += 1
    if read.gone:
        gone.add(read.job_id)
    for part, outcome in read.outcomes.items():
        result.put(read.job_id, part, _reading(outcome, tier))


def _reading(outcome: PartSamples, tier: str) -> PartOutcome:
    return outcome if isinstance(outcome, Failed) else Reading(outcome, tier)
