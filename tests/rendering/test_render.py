"""SnapshotCollector.render writes exactly what prometheus-client's encoders write.

The fast path builds sample lines itself (see exporter/collector.py), so every test here
compares its bytes with the encoder's own rendering of `collect()` for the same view: the
synthetic 100k-series pool's shape, hostile label values, odd floats, label names the
encoder would escape (which must send the render back to the encoder), every Accept variant.
`collect()` keeps the first of equal labels by our own label strings, so the property test also
compares with families it builds itself.
"""

from __future__ import annotations

import gzip
import math
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from bench import synthetic
from exporter import gzipjoin
from exporter.collector import SnapshotCollector
from exporter.metrics import MetricSpec
from exporter.model import (
    JOB_LABELS,
    POD_LABELS,
    JobData,
    Part,
    Reading,
    Sample,
    TargetSnapshot,
    Update,
    merge,
)
from exporter.rendering import TEXT_LIMIT, Chunk, Encoder, Families, LineCache
from exporter.rendering.lines import format_value, heads, with_values
from exporter.store import SnapshotStore, StoreView, share_labels

ACCEPTS = (
    "",
    "text/plain;version=0.0.4",
    "application/openmetrics-text; version=1.0.0",
    "application/openmetrics-text; version=0.0.1",
    "text/plain;version=1.0.0;escaping=allow-utf-8",
    "text/plain;version=1.0.0;escaping=underscores",
    "application/openmetrics-text;version=1.0.0;escaping=dots",
    "application/openmetrics-text;version=1.0.0;escaping=values",
)
GPU = "training_pod_gpu_utilization_ratio"
EVENTS = "training_job_events_total"


def store_of(samples_by_job: dict[str, tuple[Sample, ...]]) -> SnapshotStore:
    update = Update.of({job_id: {"part": s} for job_id, s in samples_by_job.items()})
    store = SnapshotStore()
    store.swap(merge(TargetSnapshot.empty("aihc", "t"), update, 0.0, {"fast": 60.0}).snapshot)
    return store


class Counting(SnapshotCollector):
    """Counts the renders handed back to the encoder (`encode`, the fallback)."""

    fallbacks = 0

    def encode(self, view: StoreView, encoder: Encoder) -> bytes:
        self.fallbacks += 1
        return super().encode(view, encoder)


def both(view: StoreView, accept: str, fast: bool | None = None) -> tuple[bytes, bytes]:
    """(render, the encoder's own bytes); `fast`: whether render must (not) have fallen back."""
    collector = Counting(lambda: view)
    encoder, content_type = choose_encoder(accept)
    ours = collector.render(view, encoder, content_type)
    if fast is not None:
        assert collector.fallbacks == (0 if fast else 1)
    return ours, encoder(Families(*collector.collect(view)))


@pytest.mark.parametrize("accept", ACCEPTS)
def test_synthetic_pool_renders_identically(accept: str) -> None:
    store = SnapshotStore()
    synthetic.fill(store, 3000)
    # Only the dots and values escapings rewrite legal names: there, the encoder renders.
    ours, theirs = both(store.view(), accept, fast="dots" not in accept and "values" not in accept)
    assert ours == theirs
    assert ours.count(b"\n") > 3000


def test_escaping_of_label_values() -> None:
    job = ("aihc", 'pool "a"', "back\\slash", "new\nline")
    store = store_of({"j": (Sample(GPU, POD_LABELS, (*job, "ü ✓ \u2028 {},="), 0.5),)})
    ours, theirs = both(store.view(), "", fast=True)
    assert ours == theirs
    assert (
        b'training_pod_gpu_utilization_ratio{job_id="new\\nline",pod="\xc3\xbc \xe2\x9c\x93 '
        b'\xe2\x80\xa8 {},=",provider="aihc",queue="back\\\\slash",resource_pool="pool \\"a\\""}'
        b" 0.5\n"
    ) in ours


def test_values_as_go_writes_them() -> None:
    values = (0.0, -0.0, 1.0, 1e21, 1.5e-7, 123456789.0, math.inf, -math.inf, math.nan, 7)
    job = ("aihc", "p", "q", "j")
    samples = tuple(
        Sample(GPU, POD_LABELS, (*job, f"pod-{i}"), float(v)) for i, v in enumerate(values)
    )
    ours, theirs = both(store_of({"j": samples}).view(), "", fast=True)
    assert ours == theirs
    assert b"+Inf\n" in ours and b"NaN\n" in ours and b"1.23456789e+08\n" in ours


@pytest.mark.parametrize("accept", ACCEPTS)
def test_label_names_the_encoder_escapes_fall_back_to_it(accept: str) -> None:
    odd = (Sample(GPU, ("provider", "gpu-id", "__x", "ü"), ("aihc", "a", "b", "c"), 1.0),)
    plain = (Sample(EVENTS, (*JOB_LABELS, "reason"), ("aihc", "p", "q", "j", "Oom"), 2.0),)
    ours, theirs = both(store_of({"a": plain, "b": odd}).view(), accept, fast=False)
    assert ours == theirs


def test_duplicate_and_missing_label_names_match_dict_zip() -> None:
    samples = (
        Sample(GPU, ("pod", "pod", "provider"), ("first", "second", "aihc"), 1.0),
        Sample(GPU, ("provider", "pod"), ("aihc",), 2.0),
        Sample(GPU, (), (), 3.0),
        Sample("not_a_spec_name", ("provider",), ("aihc",), 4.0),
    )
    ours, theirs = both(store_of({"j": samples}).view(), "", fast=True)
    assert ours == theirs
    assert b'{pod="second",provider="aihc"} 1.0\n' in ours
    assert b"not_a_spec_name" not in ours


# Label names every format writes as they are (escaping=allow-utf-8 quotes a leading "__").
PLAIN_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9_]*")


def reference(
    samples: list[Sample], specs: Iterable[MetricSpec], help_of: Mapping[str, str]
) -> Families:
    """prometheus-client families of `samples` built here, not by our code: each sample's labels
    as `dict(zip(names, values))`, the first of equal labels in a family kept."""
    families = {spec.name: Metric(spec.family, help_of[spec.name], spec.kind) for spec in specs}
    seen: dict[str, set[frozenset[tuple[str, str]]]] = {name: set() for name in families}
    for s in samples:
        labels = dict(zip(s.label_names, s.label_values))
        key = frozenset(labels.items())
        if key not in seen[s.name]:
            seen[s.name].add(key)
            families[s.name].add_sample(s.name, labels, float(s.value))
    return Families(*(family for family in families.values() if family.samples))


label_value = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]) | st.sampled_from('"\\\n{},='),
    max_size=12,
)
PLAIN_NAMES = ("provider", "job_id", "pod", "gpu", "a")
label_name = st.sampled_from((*PLAIN_NAMES, "gpu-id", "__r", "ü"))
# What `samples` draws from, made once: a strategy made inside a composite is made, validated
# and labelled again at every draw.
_label_names = st.lists(label_name, max_size=5)
_plain_label_names = st.lists(st.sampled_from(PLAIN_NAMES), max_size=5)
_label_values = {n: st.lists(label_value, min_size=n, max_size=n) for n in range(6)}
# Values written apart from repr (zeros of both signs, Go's exponents from 7 integer digits),
# drawn often enough that one example holds several.
_odd_values = st.sampled_from((0.0, -0.0, 999999.0, 1234567.0, -1234567.0, 1e21, math.inf))
_values = (
    _odd_values | st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**60), 2**60)
)
_sample_names = st.sampled_from((GPU, EVENTS, "training_job_info", "unknown_family"))


@st.composite
def samples(draw: st.DrawFn, label_names: st.SearchStrategy[list[str]] = _label_names) -> Sample:
    names = tuple(draw(label_names))
    values = tuple(draw(_label_values[len(names)]))
    value = draw(_values)
    return Sample(draw(_sample_names), names, values, value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # Half the examples with plain label names alone: the renderer writes those itself.
    jobs=st.one_of(
        st.dictionaries(st.text(max_size=3), st.lists(samples(labels), max_size=6), max_size=4)
        for labels in (_label_names, _plain_label_names)
    ),
    accept=st.sampled_from(ACCEPTS),
)
@example(
    # Equal labels in other orders or with a name repeated: one series.
    jobs={
        "j": [
            Sample(GPU, ("a", "pod"), ("1", "2"), 1.0),
            Sample(GPU, ("pod", "a"), ("2", "1"), 2.0),
            Sample(GPU, ("pod", "pod"), ("x", "y"), 3.0),
            Sample(GPU, ("pod",), ("y",), 4.0),
        ]
    },
    accept="",
)
@example(
    jobs={"j": [Sample(GPU, ("pod",), (p,), v) for p, v in (("x", 0.0), ("y", -0.0))]}, accept=""
)
def test_any_samples_render_identically(jobs: dict[str, list[Sample]], accept: str) -> None:
    """The render is the encoder's writing of the samples as `reference` keeps them, and it is
    the renderer's own (no fallback) unless the format or a label name needs the encoder."""
    store = store_of({job: tuple(s) for job, s in jobs.items()})
    collector = SnapshotCollector(store.view)
    specs = {spec.name: spec for spec in collector.specs}
    kept = [s for ss in jobs.values() for s in ss if s.name in specs]
    escapes = "dots" in accept or "values" in accept
    plain = all(PLAIN_NAME.fullmatch(n) for s in kept for n in s.label_names)
    ours, theirs = both(store.view(), accept, fast=True if plain and not escapes else None)
    encoder, _ = choose_encoder(accept)
    assert ours == theirs == encoder(reference(kept, specs.values(), collector.help))


def _next_job(
    job_id: str,
    new: list[Sample] | float | tuple[float, ...] | None,
    before: Mapping[str, JobData],
    snapshots: Mapping[tuple[str, str], TargetSnapshot],
) -> JobData | None:
    """A job of a step of `test_a_changing_store_renders_as_if_afresh`."""
    elsewhere = [s.jobs[job_id] for s in snapshots.values() if job_id in s.jobs]
    if isinstance(new, float | tuple):
        if job_id not in before:
            return None
        numbers = new if isinstance(new, tuple) else (new,)
        new = [
            Sample(s.name, s.label_names, s.label_values, float(numbers[i % len(numbers)]))
            for i, s in enumerate(before[job_id].parts["p"].samples)
        ]
    if new is None:
        # The job as it was, or else the very job object of the other target: every line a
        # duplicate.
        return before.get(job_id) or (elsewhere[0] if elsewhere else None)
    part = Part(tuple(new), 0.0, "fast")
    parts = {"p": part}
    if job_id in before and len(new) % 2:
        parts["q"] = before[job_id].parts["p"]
    return JobData(job_id, MappingProxyType(parts))


def test_promtool_accepts_the_synthetic_pool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed")
    store = SnapshotStore()
    synthetic.fill(store, 3000)
    body, _ = both(store.view(), "text/plain;version=0.0.4")
    done = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


# One step of a changing store: per target, job -> its samples (None: the job as it was; a
# number: its samples as they were, each with that value; numbers: each with the next of them).
Step = dict[str, dict[str, list[Sample] | float | tuple[float, ...] | None]]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(
        st.dictionaries(
            st.sampled_from(("t1", "t2")),
            st.dictionaries(
                st.sampled_from(("a", "b", "c", "d")),
                st.none()
                | st.lists(samples(), max_size=5)
                | st.floats()
                | st.lists(_values, min_size=1, max_size=4).map(tuple),
                max_size=4,
            ),
            max_size=2,
        ),
        min_size=1,
        max_size=6,
    ),
    accept=st.sampled_from(ACCEPTS),
    packed=st.booleans(),
    text_limit=st.sampled_from((0, 300, TEXT_LIMIT)),
)
@example(
    steps=[{"t1": {"a": [Sample(GPU, ("provider",), ("\r",), 0.0)]}}],
    accept="",
    packed=False,
    text_limit=TEXT_LIMIT,
)
@example(
    steps=[
        {"t1": {"a": [Sample(GPU, ("pod",), ("x",), 1.0), Sample(GPU, ("pod",), ("y",), 2.0)]}},
        {"t1": {"a": -0.0}},
        {"t1": {"a": math.nan}},
    ],
    accept="",
    packed=True,
    text_limit=0,
)
@example(
    steps=[
        {
            "t1": {
                "a": [Sample(GPU, ("pod",), ("x",), 1.0)],
                "b": [Sample(GPU, ("pod",), ("y",), 2.0)],
            }
        },
        {"t1": {"a": 3.0, "b": None}},
        {"t1": {"a": None, "b": 4.0}},
    ],
    accept="",
    packed=True,
    text_limit=TEXT_LIMIT,
)
@example(
    steps=[
        {"t1": {"a": [Sample(GPU, ("pod",), ("x",), 1.0), Sample(EVENTS, ("pod",), ("x",), 5.0)]}},
        {"t1": {"a": [Sample(GPU, ("pod",), ("x",), 2.0), Sample(EVENTS, ("pod",), ("x",), 5.0)]}},
        {"t1": {"a": [Sample(GPU, ("pod",), ("x",), 2.0), Sample(EVENTS, ("pod",), ("x",), 6.0)]}},
    ],
    accept="",
    packed=True,
    text_limit=0,
)
@example(
    steps=[
        {"t1": {"a": [Sample(GPU, ("pod",), (p,), 1.0) for p in "wxyz"]}},
        {"t1": {"a": (0.0, -0.0, math.inf)}},
    ],
    accept="",
    packed=True,
    text_limit=TEXT_LIMIT,
)
@example(
    steps=[{"t1": {"a": [Sample(GPU, ("pod",), ("x",), 7)]}}],
    accept="",
    packed=False,
    text_limit=TEXT_LIMIT,
)
def test_a_changing_store_renders_as_if_afresh(
    steps: list[Step], accept: str, packed: bool, text_limit: int
) -> None:
    """One renderer through a sequence of changes (jobs kept as the very objects, changed,
    given new values alone, added, gone, clashing with each other's series) writes at every
    step exactly what the encoder writes for that view, in identity and in gzip, and counts
    what the guard left out. `packed`: each snapshot is packed as the store keeps it, so a
    job given new values alone keeps its shape and its lines are written from the last ones.
    `text_limit`: the chunks let their text go (0), keep it, or do either as the view grows
    and shrinks past 300 bytes of lines."""
    encoder, content_type = choose_encoder(accept)
    counted: list[int] = []
    collector = Counting(lambda: view, on_duplicates=lambda c: counted.append(sum(c.values())))
    renderer = collector.renderer([(encoder, content_type)], text_limit=text_limit)
    trailer = encoder(Families())
    snapshots: dict[tuple[str, str], TargetSnapshot] = {}
    for version, step in enumerate(steps, start=1):
        for target, jobs in step.items():
            key = ("aihc", target)
            previous = snapshots.get(key, TargetSnapshot.empty(*key))
            after = {}
            for job_id, new in jobs.items():
                job = _next_job(job_id, new, previous.jobs, snapshots)
                if job is not None:
                    after[job_id] = job
            snapshot = TargetSnapshot("aihc", target, MappingProxyType(after), 0.0, 0)
            snapshots[key] = share_labels(snapshot, previous) if packed else snapshot
        view = StoreView(version, MappingProxyType(dict(sorted(snapshots.items()))))
        fallbacks = collector.fallbacks
        (rendering,) = renderer.render(view)
        theirs = encoder(Families(*collector.collect(view)))
        ours = b"".join(rendering.text())
        assert ours + trailer == theirs
        head, end = gzipjoin.finish(rendering.deflated, trailer, 6)
        assert gzip.decompress(head + rendering.deflated.raw + end) == theirs
        if collector.fallbacks == fallbacks:
            known = sum(
                1
                for snapshot in view.snapshots.values()
                for job in snapshot.jobs.values()
                for part in job.parts.values()
                for s in part.samples
                if s.name in (GPU, EVENTS, "training_job_info")
            )
            # Split on "\n" only: a label value may hold a bare "\r", which the format keeps as is.
            lines = sum(1 for line in ours.split(b"\n")[:-1] if not line.startswith(b"#"))
            assert counted[-1] == known - lines


def test_parts_given_new_values_alone_are_written_from_their_last_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A part read again with the same series keeps its shape (`share_labels`), and the
    renderer writes its lines from its last ones: no label string is built again."""
    store = SnapshotStore()
    synthetic.fill(store, 3000)
    collector = SnapshotCollector(store.view)
    encoder, content_type = choose_encoder("")
    renderer = collector.renderer([(encoder, content_type)])
    renderer.render(store.view())
    target = synthetic.plan(3000)[0]
    job = target.job_ids[0]
    fresh = synthetic.job_parts(target, seed=8, only=[job])[job]
    update = Update(None, True, {})
    for part, samples in fresh.items():
        if part.startswith("metric:"):
            update.put(job, part, Reading(samples, "fast"))
    previous = store.get(target.provider, target.target)
    store.swap(merge(previous, update, synthetic.NOW, synthetic.BOUNDS).snapshot)
    built: list[tuple[str, ...]] = []
    label = LineCache.label

    def counted(cache: LineCache, names: tuple[str, ...], values: tuple[str, ...]) -> str:
        built.append(values)
        return label(cache, names, values)

    monkeypatch.setattr(LineCache, "label", counted)
    (rendering,) = renderer.render(store.view())
    assert built == []
    ours = b"".join(rendering.text())
    assert ours + encoder(Families()) == encoder(Families(*collector.collect(store.view())))
    changed = fresh["metric:training_pod_gpu_utilization_ratio"][0]
    assert f" {changed.value}\n".encode() in ours


def test_chunks_keep_their_text_up_to_the_limit() -> None:
    """Up to TEXT_LIMIT bytes of lines, a rendering's chunks keep their text, as identity
    scrapes write it; above it they keep their deflate alone, and the text is the same."""
    store = SnapshotStore()
    synthetic.fill(store, 3000)
    collector = SnapshotCollector(store.view)
    encoder, content_type = choose_encoder("")
    (kept,) = collector.renderer([(encoder, content_type)]).render(store.view())
    chunks = [part for part in kept.parts if isinstance(part, Chunk)]
    assert chunks and all(chunk.data is not None for chunk in chunks)
    lines = sum(len(chunk) for chunk in chunks)
    assert lines <= TEXT_LIMIT
    (textless,) = collector.renderer([(encoder, content_type)], text_limit=lines - 1).render(
        store.view()
    )
    chunks = [part for part in textless.parts if isinstance(part, Chunk)]
    assert chunks and all(chunk.data is None for chunk in chunks)
    assert b"".join(textless.text()) == b"".join(kept.text())
    assert textless.deflated == kept.deflated


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**70), 2**70))
@example(1234567.0)
@example(999999.0)
@example(-123456789.0)
@example(1e21)
@example(-0.0)
def test_values_are_written_as_prometheus_client_writes_them(number: float) -> None:
    assert format_value(number) == floatToGoString(number)


@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**7), 10**7)),
    st.text(alphabet=' a"\\\r{}=', max_size=6),
)
@example([999999.9, 1e6, -5e6], "")
@example([1.0, 1234567.0], "")
@example([0.0, -0.0, math.inf, -0.0], "")
def test_lines_written_again_take_each_value_as_prometheus_client_writes_it(
    numbers: list[float], label: str
) -> None:
    lines = b"".join(f'm{{a="{label}"}} 0\n'.encode() for _ in numbers)
    starts = heads(lines)
    assert len(starts) == len(numbers)
    expected = b"".join(
        f'm{{a="{label}"}} {floatToGoString(n)}\n'.encode() for n in map(float, numbers)
    )
    assert with_values(starts, [float(n) for n in numbers], LineCache()) == expected
