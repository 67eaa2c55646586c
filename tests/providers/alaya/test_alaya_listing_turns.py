"""A long job list is placed in batches: the event loop serves scrapes between them."""

from __future__ import annotations

import time

from pydantic import SecretStr

from exporter.providers.alaya import AlayaJob, AlayaProvider, AlayaTarget
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.alaya import DEMO_API_KEY
from exporter.targets import tier_plan
from tests.loop_turns import longest_turn

JOBS, PODS = 1000, 8


async def test_placing_a_thousand_jobs_of_eight_pods_lets_the_loop_turn() -> None:
    # The configured list: placing its 8,000 pods needs no request, only the loop.
    jobs = [
        AlayaJob(id=f"job-{i:04d}", pods=[f"pod-{i}-{k}" for k in range(PODS)]) for i in range(JOBS)
    ]
    target = AlayaTarget(
        name="turns", endpoint="http://127.0.0.1:9", api_key=SecretStr(DEMO_API_KEY), jobs=jobs
    )
    provider = AlayaProvider(target, SelfMetrics(), tier_plan(target, 60.0))
    context = PollContext(deadline=time.monotonic() + 60, started_at=time.time())
    try:
        await provider.list_jobs(context)
        longest, whole, listing = await longest_turn(provider.list_jobs(context))
    finally:
        await provider.close()
    assert len(listing.units) == JOBS * PODS
    assert longest < whole / 4
