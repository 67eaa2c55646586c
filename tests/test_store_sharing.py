"""The store keeps one object per distinct label tuple and label string, and nothing else
changes: the same samples, parts, jobs and counts, in the same order."""

from __future__ import annotations

from bench import synthetic
from exporter.model import POD_LABELS, Sample, TargetSnapshot, Update, merge
from exporter.providers.aihc.mapping import label
from exporter.store import SnapshotStore, share_labels

GPU = "training_pod_gpu_utilization_ratio"
CPU = "training_pod_cpu_utilization_ratio"


def fresh(values: tuple[str, ...]) -> tuple[str, ...]:
    # New strings, as AIHC's mapping makes them per sample.
    return tuple(label(v) for v in values)


def test_equal_label_tuples_and_strings_become_one_object() -> None:
    pod = ("aihc", "cce-1", "q", "job-1", "job-1-worker-0")
    parts = {
        "metric:GpuUsage": (Sample(GPU, (*POD_LABELS,), fresh(pod), 0.5),),
        "metric:CpuUsage": (Sample(CPU, (*POD_LABELS,), fresh(pod), 0.25),),
    }
    update = Update.of({"job-1": parts})
    snapshot = merge(TargetSnapshot.empty("aihc", "t"), update, 1.0, {"fast": 60.0}).snapshot
    before = snapshot.samples()
    assert before[0].label_values is not before[1].label_values
    store = SnapshotStore()
    store.swap(snapshot)
    kept = store.get("aihc", "t")
    after = kept.samples()
    assert after == before
    assert after[0].label_values is after[1].label_values
    assert after[0].label_names is after[1].label_names
    assert (kept.series, kept.taken_at, list(kept.jobs)) == (2, 1.0, ["job-1"])
    assert list(kept.jobs["job-1"].parts) == ["metric:GpuUsage", "metric:CpuUsage"]


def test_strings_shared_across_different_tuples() -> None:
    pod = ("aihc", "cce-1", "q", "job-1", "job-1-worker-0")
    samples = (
        Sample(GPU, (*POD_LABELS, "gpu"), (*fresh(pod), "card-0"), 1.0),
        Sample(GPU, (*POD_LABELS, "gpu"), (*fresh(pod), "card-1"), 2.0),
    )
    update = Update.of({"job-1": {"metric:GpuUsage": samples}})
    empty = TargetSnapshot.empty("aihc", "t")
    shared = share_labels(merge(empty, update, 0.0, {"fast": 60.0}).snapshot)
    first, second = shared.samples()
    assert all(a is b for a, b in zip(first.label_values[:5], second.label_values[:5], strict=True))


def test_synthetic_pool_is_unchanged_by_sharing() -> None:
    for snapshot in synthetic.snapshots(3000):
        shared = share_labels(snapshot)
        assert shared.samples() == snapshot.samples()
        assert shared.series == snapshot.series
        assert {j: list(d.parts) for j, d in shared.jobs.items()} == {
            j: list(d.parts) for j, d in snapshot.jobs.items()
        }
