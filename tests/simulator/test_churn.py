"""Scripted churn in a fixed AIHC world: jobs added, finished and removed between polls."""

from __future__ import annotations

from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_replies import job_item


def test_a_job_added_after_a_removal_never_takes_a_live_jobs_id() -> None:
    world = AihcWorld.fixed(jobs=3)
    first, second, third = list(world.jobs)
    world.remove_job(second)
    added = world.add_job()
    assert added.job_id not in (first, second, third)
    assert set(world.jobs) == {first, third, added.job_id}


def test_finishing_sets_the_finish_time_and_removing_hides_the_job() -> None:
    world = AihcWorld.fixed(jobs=2, clock=lambda: 1_750_000_000.0)
    done, running = list(world.jobs)
    world.set_status(done, "Failed")
    items = {j.job_id: job_item(world, j, world.now()) for j in world.jobs_in("cce-test0001")}
    assert (items[done]["status"], items[done]["finishedAt"]) == ("Failed", "2025-06-15T15:06:40Z")
    assert (items[running]["status"], items[running]["finishedAt"]) == ("Running", "")
    world.remove_job(done)
    assert [j.job_id for j in world.jobs_in("cce-test0001")] == [running]
    assert world.job(done) is None
