"""merge(): what stays, what goes, and the series limit."""

from __future__ import annotations

from exporter.model import FAILED, POD_LABELS, PollResult, Sample, TargetSnapshot, merge

GPU = "training_pod_gpu_utilization_ratio"


def samples(job: str, pods: int, value: float = 1.0) -> tuple[Sample, ...]:
    return tuple(
        Sample(GPU, POD_LABELS, ("aihc", "p", "q", job, f"{job}-w{i}"), value) for i in range(pods)
    )


def poll(**jobs: object) -> PollResult:
    result = PollResult()
    for job, outcome in jobs.items():
        result.put(job, "metric:GpuUsage", outcome)  # type: ignore[arg-type]
    return result


EMPTY = TargetSnapshot.empty("aihc", "t")


def test_failed_part_keeps_last_good_until_stale_after() -> None:
    first = merge(EMPTY, poll(a=samples("a", 2, 1.0), b=samples("b", 2, 1.0)), 100.0, 30).snapshot
    second = merge(first, poll(a=FAILED, b=samples("b", 2, 2.0)), 110.0, 30)
    assert second.stale_parts == 1
    by_job = {
        j: [s.value for s in d.parts["metric:GpuUsage"].samples]
        for j, d in second.snapshot.jobs.items()
    }
    assert by_job == {"a": [1.0, 1.0], "b": [2.0, 2.0]}
    third = merge(second.snapshot, poll(a=FAILED, b=samples("b", 2, 3.0)), 131.0, 30)
    assert set(third.snapshot.jobs) == {"b"}
    assert third.expired_parts == 1


def test_job_not_in_result_is_gone_at_once() -> None:
    first = merge(EMPTY, poll(a=samples("a", 1), b=samples("b", 1)), 100.0, 300).snapshot
    second = merge(first, poll(b=samples("b", 1)), 101.0, 300).snapshot
    assert set(second.jobs) == {"b"}
    assert second.series == 1


def test_unlisted_poll_carries_every_job_under_the_staleness_rule() -> None:
    first = merge(EMPTY, poll(a=samples("a", 3)), 100.0, 60).snapshot
    kept = merge(first, PollResult(listed=False), 150.0, 60)
    assert kept.snapshot.series == 3 and kept.stale_parts == 1
    gone = merge(kept.snapshot, PollResult(listed=False), 161.0, 60)
    assert gone.snapshot.series == 0


def test_series_limit_leaves_out_whole_jobs_and_keeps_the_old_ones() -> None:
    first = merge(EMPTY, poll(a=samples("a", 4), b=samples("b", 4)), 1.0, 60, max_series=10)
    assert set(first.snapshot.jobs) == {"a", "b"}
    # A new job that would cross the limit is left out, not random series of the old ones.
    second = merge(
        first.snapshot,
        poll(new=samples("new", 4), a=samples("a", 4), b=samples("b", 4)),
        2.0,
        60,
        max_series=10,
    )
    assert set(second.snapshot.jobs) == {"a", "b"}
    assert second.jobs_left_out == ("new",)
    assert second.snapshot.series == 8


def test_snapshot_is_immutable() -> None:
    snap = merge(EMPTY, poll(a=samples("a", 1)), 1.0, 60).snapshot
    try:
        snap.jobs["x"] = snap.jobs["a"]  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("snapshot jobs must not be writable")
