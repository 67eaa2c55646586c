"""One full read of a target: the job list, then every item of every unit once.

Not how the exporter runs (its runner reads each tier at its own interval); this is what tests
and `bench/poll_cycle.py` use to see, in one call, every part a target's jobs have and what
reading them all costs.
"""

from __future__ import annotations

import asyncio

from exporter.model import FINAL_TIER, Failed, PartOutcome, PollResult, Reading
from exporter.providers.base import (
    PartSamples,
    PollContext,
    Provider,
    ReadContext,
    ReadResult,
    Unit,
)


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
