"""A listing that carries thousands of jobs' samples is kept in batches: the event loop serves
scrapes and reads between them."""

from __future__ import annotations

from bench.synthetic import ListedProvider
from exporter.model import JOB_LABELS, Sample
from exporter.providers.base import Listing, PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.store import SnapshotStore
from exporter.work.runner import TargetRunner
from tests.loop_turns import longest_turn

JOBS = 3000


class ManyJobs(ListedProvider):
    """Every job's one part in the list itself, as AIHC's listing carries each job's samples;
    the list is made before the round (what is measured is the runner's keeping of it)."""

    def __init__(self, provider: str, target: str) -> None:
        super().__init__(provider, target)
        labels = [("aihc", "p", "q", f"job-{i}") for i in range(JOBS)]
        samples = {v[-1]: (Sample("training_job_info", JOB_LABELS, v, 1.0),) for v in labels}
        self._listing = Listing(
            parts={job: frozenset({"job"}) for job in samples},
            readings={job: {"job": s} for job, s in samples.items()},
        )

    async def list_jobs(self, context: PollContext) -> Listing:
        return self._listing


async def test_keeping_a_listing_of_thousands_of_jobs_lets_the_loop_turn() -> None:
    runner = TargetRunner(
        ManyJobs("aihc", "t"), SnapshotStore(), SelfMetrics(), budget=None, workers=1
    )
    longest, whole, listing = await longest_turn(runner.round())
    assert listing is not None and len(listing.readings) == JOBS
    assert len(runner.store.view().snapshots[("aihc", "t")].jobs) == JOBS
    assert longest < whole / 4
