"""merge(): what stays, what goes, tier by tier, and the series limit."""

from __future__ import annotations

from exporter.model import (
    FAILED,
    FINAL_TIER,
    POD_LABELS,
    Reading,
    Sample,
    TargetSnapshot,
    Update,
    merge,
)

GPU = "training_pod_gpu_utilization_ratio"
TEMP = "training_pod_gpu_temperature_celsius"
BOUNDS = {"fast": 30.0, "slow": 300.0}


def samples(job: str, pods: int, value: float = 1.0, name: str = GPU) -> tuple[Sample, ...]:
    return tuple(
        Sample(name, POD_LABELS, ("aihc", "p", "q", job, f"{job}-w{i}"), value) for i in range(pods)
    )


def poll(**jobs: object) -> Update:
    update = Update(parts={job: frozenset({"metric:GpuUsage"}) for job in jobs})
    for job, outcome in jobs.items():
        fresh = outcome if outcome is FAILED else Reading(outcome, "fast")  # type: ignore[arg-type]
        update.put(job, "metric:GpuUsage", fresh)
    return update


EMPTY = TargetSnapshot.empty("aihc", "t")


def test_failed_part_keeps_last_good_until_its_bound() -> None:
    first = merge(EMPTY, poll(a=samples("a", 2, 1.0), b=samples("b", 2, 1.0)), 100.0, BOUNDS)
    second = merge(first.snapshot, poll(a=FAILED, b=samples("b", 2, 2.0)), 110.0, BOUNDS)
    assert second.stale_parts == 1
    by_job = {
        j: [s.value for s in d.parts["metric:GpuUsage"].samples]
        for j, d in second.snapshot.jobs.items()
    }
    assert by_job == {"a": [1.0, 1.0], "b": [2.0, 2.0]}
    third = merge(second.snapshot, poll(a=FAILED, b=samples("b", 2, 3.0)), 131.0, BOUNDS)
    assert set(third.snapshot.jobs) == {"b"}
    assert third.expired_parts == 1


def test_a_part_not_read_lives_under_its_own_tier_bound() -> None:
    # GPU utilisation is read fast, temperature slow: between two slow reads the temperature
    # stays; the GPU part, once its reads stop, goes after the fast bound.
    parts = frozenset({"metric:GpuUsage", "metric:GpuTemperature"})
    update = Update(parts={"a": parts})
    update.put("a", "metric:GpuUsage", Reading(samples("a", 1), "fast"))
    update.put("a", "metric:GpuTemperature", Reading(samples("a", 1, 60.0, TEMP), "slow"))
    first = merge(EMPTY, update, 0.0, BOUNDS).snapshot
    fast_again = Update(parts={"a": parts})
    fast_again.put("a", "metric:GpuUsage", Reading(samples("a", 1, 0.5), "fast"))
    between = merge(first, fast_again, 200.0, BOUNDS)
    assert set(between.snapshot.jobs["a"].parts) == set(parts)
    assert between.stale_parts == 0, "not read is not failed"
    quiet = merge(between.snapshot, Update(parts={"a": parts}), 290.0, BOUNDS)
    assert set(quiet.snapshot.jobs["a"].parts) == {"metric:GpuTemperature"}
    assert quiet.expired_parts == 1
    gone = merge(quiet.snapshot, Update(parts={"a": parts}), 301.0, BOUNDS)
    assert gone.snapshot.jobs == {}


def test_a_part_the_listing_no_longer_names_is_gone_at_once() -> None:
    first = merge(EMPTY, poll(a=samples("a", 2)), 0.0, BOUNDS).snapshot
    update = Update(parts={"a": frozenset({"job"})})
    update.put("a", "job", Reading(samples("a", 1, name="training_job_replicas"), "fast"))
    second = merge(first, update, 1.0, BOUNDS).snapshot
    assert set(second.jobs["a"].parts) == {"job"}


def test_final_parts_never_go_stale_while_listed() -> None:
    update = Update(parts={"a": frozenset({"pods"})})
    update.put("a", "pods", Reading(samples("a", 1), FINAL_TIER))
    first = merge(EMPTY, update, 0.0, BOUNDS).snapshot
    later = merge(first, Update(parts={"a": frozenset({"pods"})}), 10**9, BOUNDS).snapshot
    assert set(later.jobs["a"].parts) == {"pods"}


def test_job_not_in_listing_is_gone_at_once() -> None:
    first = merge(EMPTY, poll(a=samples("a", 1), b=samples("b", 1)), 100.0, BOUNDS).snapshot
    second = merge(first, poll(b=samples("b", 1)), 101.0, BOUNDS).snapshot
    assert set(second.jobs) == {"b"}
    assert second.series == 1


def test_update_without_listing_keeps_jobs_and_unchanged_jobs_keep_their_object() -> None:
    first = merge(EMPTY, poll(a=samples("a", 1), b=samples("b", 1)), 100.0, BOUNDS).snapshot
    update = Update()
    update.put("b", "metric:GpuUsage", Reading(samples("b", 1, 2.0), "fast"))
    second = merge(first, update, 101.0, BOUNDS).snapshot
    assert set(second.jobs) == {"a", "b"}
    assert second.jobs["a"] is first.jobs["a"]
    assert second.jobs["b"] is not first.jobs["b"]


def test_unlisted_update_carries_every_job_under_the_staleness_rule() -> None:
    first = merge(EMPTY, poll(a=samples("a", 3)), 100.0, BOUNDS).snapshot
    kept = merge(first, Update(parts={}, listed=False), 125.0, BOUNDS)
    assert kept.snapshot.series == 3
    gone = merge(kept.snapshot, Update(parts={}, listed=False), 131.0, BOUNDS)
    assert gone.snapshot.series == 0


def test_series_limit_leaves_out_whole_jobs_and_keeps_the_old_ones() -> None:
    first = merge(EMPTY, poll(a=samples("a", 4), b=samples("b", 4)), 1.0, BOUNDS, max_series=10)
    assert set(first.snapshot.jobs) == {"a", "b"}
    # A new job that would cross the limit is left out, not random series of the old ones.
    second = merge(
        first.snapshot,
        poll(new=samples("new", 4), a=samples("a", 4), b=samples("b", 4)),
        2.0,
        BOUNDS,
        max_series=10,
    )
    assert set(second.snapshot.jobs) == {"a", "b"}
    assert second.jobs_left_out == ("new",)
    assert second.snapshot.series == 8


def test_snapshot_is_immutable() -> None:
    snap = merge(EMPTY, poll(a=samples("a", 1)), 1.0, BOUNDS).snapshot
    try:
        snap.jobs["x"] = snap.jobs["a"]  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("snapshot jobs must not be writable")
