"""The store keeps one object per distinct label tuple and label string, and nothing else
changes: the same samples, parts, jobs and counts, in the same order."""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from bench import synthetic
from exporter.model import POD_LABELS, Sample, Samples, Shape, TargetSnapshot, Update, merge
from exporter.providers.aihc.mapping import label
from exporter.store import SnapshotStore, share_labels

GPU = "training_pod_gpu_utilization_ratio"
CPU = "training_pod_cpu_utilization_ratio"
POD = ("aihc", "cce-1", "q", "job-1", "job-1-worker-0")


def fresh(values: tuple[str, ...]) -> tuple[str, ...]:
    # New strings, as AIHC's mapping makes them per sample.
    return tuple(label(v) for v in values)


def test_equal_label_tuples_and_strings_become_one_object() -> None:
    parts = {
        "metric:GpuUsage": (Sample(GPU, (*POD_LABELS,), fresh(POD), 0.5),),
        "metric:CpuUsage": (Sample(CPU, (*POD_LABELS,), fresh(POD), 0.25),),
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
    samples = (
        Sample(GPU, (*POD_LABELS, "gpu"), (*fresh(POD), "card-0"), 1.0),
        Sample(GPU, (*POD_LABELS, "gpu"), (*fresh(POD), "card-1"), 2.0),
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


def _stored(store: SnapshotStore, samples: Sequence[Sample], now: float) -> TargetSnapshot:
    previous = store.get("aihc", "t") or TargetSnapshot.empty("aihc", "t")
    update = Update.of({"job-1": {"metric:GpuUsage": samples}})
    store.swap(merge(previous, update, now, {"fast": 60.0}).snapshot)
    kept = store.get("aihc", "t")
    assert kept is not None
    return kept


def _part_samples(snapshot: TargetSnapshot) -> Sequence[Sample]:
    return snapshot.jobs["job-1"].parts["metric:GpuUsage"].samples


def test_a_part_read_again_keeps_its_previous_labels_and_unchanged_samples() -> None:
    def read(*values: float) -> tuple[Sample, ...]:
        return tuple(
            Sample(GPU, (*POD_LABELS, "gpu"), (*fresh(POD), f"card-{i}"), v)
            for i, v in enumerate(values)
        )

    store = SnapshotStore()
    first = _part_samples(_stored(store, read(0.5, 0.25), 1.0))
    # The same values again: the previous tuple itself (the renderer keeps its lines).
    again = _part_samples(_stored(store, read(0.5, 0.25), 2.0))
    assert again is first
    # A new value: new samples, but the previous label tuples.
    changed = _part_samples(_stored(store, read(0.5, 0.75), 3.0))
    assert changed is not first and changed == read(0.5, 0.75)
    assert all(a.label_values is b.label_values for a, b in zip(changed, first, strict=True))
    # Equal numbers that print apart are not the same sample; a NaN of the same bits writes
    # the same line, unequal as it is.
    zero = _part_samples(_stored(store, read(0.0, 0.75), 4.0))
    negative = _part_samples(_stored(store, read(-0.0, 0.75), 5.0))
    assert negative is not zero and math.copysign(1.0, negative[0].value) == -1.0
    nan = _part_samples(_stored(store, read(math.nan, 0.75), 6.0))
    assert _part_samples(_stored(store, read(math.nan, 0.75), 7.0)) is nan
    # Another card in the place of one: its own labels.
    moved = (*read(0.5)[:1], Sample(GPU, (*POD_LABELS, "gpu"), (*fresh(POD), "card-9"), 0.75))
    kept = _part_samples(_stored(store, moved, 8.0))
    assert kept == moved and kept[1].label_values[-1] == "card-9"


def test_packed_samples_on_the_previous_shape_with_the_same_values_are_the_previous() -> None:
    """A provider may hand its samples packed (AIHC's metric types): on the shape of the part's
    previous samples and with the same values, the store keeps the previous object, which
    the renderer does not render again; anything else is kept as it came."""
    shape = Shape((GPU,), (POD_LABELS,), (POD, (*POD[:4], "job-1-worker-1")))
    store = SnapshotStore()
    first = _part_samples(_stored(store, Samples(shape, array("d", [0.5, 0.25])), 1.0))
    assert _part_samples(_stored(store, Samples(shape, array("d", [0.5, 0.25])), 2.0)) is first
    changed = Samples(shape, array("d", [0.5, 0.75]))
    assert _part_samples(_stored(store, changed, 3.0)) is changed
    # Equal values on another shape object, and -0.0 for 0.0: not the same lines.
    other = Samples(Shape(shape.names, shape.label_names, shape.label_values), changed.values)
    assert _part_samples(_stored(store, other, 4.0)) is other
    zero = _part_samples(_stored(store, Samples(shape, array("d", [0.0, 0.75])), 5.0))
    negative = Samples(shape, array("d", [-0.0, 0.75]))
    assert _part_samples(_stored(store, negative, 6.0)) is negative is not zero


_values = st.sampled_from([0.0, -0.0, 0.5, 1.0, math.nan, math.inf])
_places = st.lists(
    st.tuples(st.sampled_from([GPU, CPU]), st.sampled_from(["card-0", "card-1", "card-2"])),
    max_size=4,
)


def _written(samples: Sequence[Sample]) -> list[tuple[object, ...]]:
    return [(s.name, s.label_names, s.label_values, repr(s.value)) for s in samples]


@settings(deadline=None)
@given(st.data())
def test_shared_parts_write_what_was_read(data: st.DataObject) -> None:
    """Reads of one part, most with the same samples in the same places and new values."""
    store = SnapshotStore()
    places = data.draw(_places)
    for now in range(data.draw(st.integers(2, 5))):
        if now % 3 == 2 and data.draw(st.booleans()):
            places = data.draw(_places)
        read = tuple(
            Sample(name, (*POD_LABELS, "gpu"), (*fresh(POD), card), data.draw(_values))
            for name, card in places
        )
        assert _written(_part_samples(_stored(store, read, float(now)))) == _written(read)
