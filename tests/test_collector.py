"""Store, collector and exposition: consistency, staleness, negotiation, gzip, caching."""

from __future__ import annotations

import ast
import asyncio
import gzip
import math
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import hypothesis
import prometheus_client
import pytest
from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Exemplar

import exporter
from bench.synthetic import ListedProvider, Parts
from exporter.collector import (
    FORMATS,
    OPENMETRICS,
    SELF_METRICS_MAX_AGE,
    TEXT,
    Exposition,
    SelfEncoder,
    SnapshotCollector,
    negotiate,
)
from exporter.config import Settings
from exporter.model import POD_LABELS, Sample, TargetSnapshot
from exporter.rendering import Families
from exporter.selfmetrics import SelfMetrics
from exporter.server import STATE, build_app
from exporter.store import SnapshotStore
from tests.runner_helpers import poll_app, stepped_app
from tests.scrape_helpers import HeldRenders, Renders, current, rendered, until_ready

GPU = "training_pod_gpu_utilization_ratio"


class CountingProvider(ListedProvider):
    """A provider whose every series carries the number of the poll that produced it."""

    def __init__(self, target: str = "t1", jobs: int = 50, pods: int = 40) -> None:
        super().__init__("aihc", target, poll_interval=3600)
        self.jobs = jobs
        self.pods = pods
        self.polls = 0
        self.drop_job: str | None = None

    def parts(self) -> Parts:
        self.polls += 1
        result: Parts = {}
        for j in range(self.jobs):
            job_id = f"job-{j}"
            if job_id == self.drop_job:
                continue
            samples = tuple(
                Sample(
                    GPU,
                    POD_LABELS,
                    ("aihc", "cce-1", "q", job_id, f"{job_id}-worker-{p}"),
                    float(self.polls),
                )
                for p in range(self.pods)
            )
            result[job_id] = {"metric:GpuUsage": samples}
        return result

    def describe(self) -> dict[str, str]:
        return {"jobs": str(self.jobs)}


def settings(**extra: object) -> Settings:
    return Settings(demo=True, poll_interval=3600, **extra)  # type: ignore[arg-type]


@pytest.fixture
async def client(aiohttp_client) -> AsyncIterator[TestClient]:  # type: ignore[no-untyped-def]
    provider = CountingProvider()
    app = stepped_app(settings(), providers=[provider])
    c = await aiohttp_client(app)
    await until_ready(c)
    yield c


def gpu_values(text: str) -> list[float]:
    """Each GPU line's value, its last field (no timestamps): prometheus-client's parser spends
    0.15 s on a scrape of the fixture's 2,000 lines."""
    return [
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(GPU + "{")
    ]


def parsed_gpu_values(text: str) -> list[float]:
    """`gpu_values`, read by prometheus-client's parser: the whole text must parse."""
    for family in text_string_to_metric_families(text):
        if family.name == GPU:
            return [s.value for s in family.samples]
    return []


async def test_scrape_during_polls_sees_one_snapshot(client: TestClient) -> None:
    async def keep_polling() -> None:
        for _ in range(30):
            await poll_app(client.app)
            await asyncio.sleep(0)

    async def keep_scraping() -> list[set[float]]:
        seen = []
        for _ in range(30):
            resp = await client.get("/metrics")
            seen.append(set(gpu_values(await resp.text())))
        return seen

    _, scrapes = await asyncio.gather(keep_polling(), keep_scraping())
    assert all(len(values) == 1 for values in scrapes), [v for v in scrapes if len(v) != 1]
    assert len({v for s in scrapes for v in s}) > 1, "the polls and scrapes did not interleave"


async def test_job_missing_from_new_snapshot_is_gone(client: TestClient) -> None:
    state = client.app[STATE]
    provider = state.providers[0]
    text = await (await client.get("/metrics")).text()
    assert 'job_id="job-7"' in text
    provider.drop_job = "job-7"  # type: ignore[attr-defined]
    await poll_app(client.app)
    # Scrapes serve the last complete rendering: this one waits for the poll's.
    await rendered(client.app)
    text = await (await client.get("/metrics")).text()
    assert 'job_id="job-7"' not in text
    assert 'job_id="job-8"' in text
    assert 'training_exporter_series{provider="aihc"} 1960.0' in text


async def test_render_once_per_snapshot(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = client.app[STATE]
    await rendered(client.app)
    renders, version = Renders(monkeypatch), state.store.view().version
    bodies = [await (await client.get("/metrics")).text() for _ in range(5)]
    assert renders.count == 0
    assert len({gpu_values(b)[0] for b in bodies}) == 1
    await poll_app(client.app)
    await rendered(client.app)
    after = await (await client.get("/metrics")).text()
    # Each series carries the number of the listing that produced it: the poll's last.
    polls = state.providers[0].polls  # type: ignore[attr-defined]
    assert gpu_values(after)[0] == polls > gpu_values(bodies[0])[0]
    # At most once per store version the poll made (it may swap more than once).
    assert 1 <= renders.count <= state.store.view().version - version


async def test_openmetrics_negotiation(client: TestClient) -> None:
    resp = await client.get(
        "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert resp.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    text = await resp.text()
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    names = {f.name for f in om_parse(text)}
    assert {GPU, "training_exporter_up", "training_exporter_api_requests"} <= names


async def test_plain_text_default(client: TestClient) -> None:
    resp = await client.get("/metrics", headers={"Accept": "*/*"})
    assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# EOF" not in await resp.text()


async def test_gzip_with_a_real_client(client: TestClient) -> None:
    url = client.make_url("/metrics")
    async with aiohttp.ClientSession(auto_decompress=False) as session:
        async with session.get(url, headers={"Accept-Encoding": "gzip"}) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            raw = await resp.read()
        async with session.get(url, headers={"Accept-Encoding": "identity"}) as plain:
            assert "Content-Encoding" not in plain.headers
            plain_text = await plain.text()
    text = gzip.decompress(raw).decode()
    assert len(raw) < len(text) / 5
    assert parsed_gpu_values(text) == parsed_gpu_values(plain_text)
    # Self-metrics are appended per scrape, after the cached part: the stream must be whole.
    assert text.rstrip().splitlines()[-1].startswith("training_exporter_")


async def test_gzip_openmetrics_decodes_with_curl(client: TestClient) -> None:
    url = str(client.make_url("/metrics"))
    out = await asyncio.to_thread(
        subprocess.run,
        ["curl", "-sf", "--compressed", "-H", "Accept: application/openmetrics-text", url],
        capture_output=True,
        text=True,
        timeout=20,
    )
    if out.returncode == 127:
        pytest.skip("curl not installed")
    assert out.returncode == 0, out.stderr
    assert out.stdout.endswith("# EOF\n")
    assert {f.name for f in om_parse(out.stdout)} >= {GPU}


async def test_health_ready_landing(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    provider = CountingProvider(target="pool-x", jobs=1, pods=1)
    app = stepped_app(settings(), providers=[provider])
    c = await aiohttp_client(app)
    assert (await c.get("/-/healthy")).status == 200
    await app[STATE].scheduler.wait_ready(10)
    assert (await c.get("/-/ready")).status == 200
    page = await (await c.get("/")).text()
    assert "pool-x" in page and 'href="/metrics"' in page


async def test_ready_only_once_a_scrape_gets_the_first_round(
    aiohttp_client,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Scrapes get the last complete rendering: while the first round's render is held up,
    # /-/ready says 503 though every target's first round is over; then 200, and a scrape
    # right after it holds the round.
    app = build_app(settings(), providers=[CountingProvider(jobs=2, pods=2)])
    state = app[STATE]
    held = HeldRenders(monkeypatch)
    try:
        c = await aiohttp_client(app)
        assert await state.scheduler.wait_ready(10)
        assert (await c.get("/-/ready")).status == 503
    finally:
        held.release()
    deadline = asyncio.get_running_loop().time() + 10
    while (await c.get("/-/ready")).status != 200:
        assert asyncio.get_running_loop().time() < deadline
    assert gpu_values(await (await c.get("/metrics")).text()) == [1.0] * 4


@given(accept=st.text(max_size=80) | st.just("application/openmetrics-text; version=x.y"))
def test_any_accept_header_maps_onto_one_of_two_formats(accept: str) -> None:
    assert negotiate(accept) in FORMATS


def test_openmetrics_versions_are_one_format() -> None:
    for version in ("1.0.0", "1.7.0", "2.0.0", "99.1.1"):
        header = f"application/openmetrics-text;version={version};escaping=dots"
        assert negotiate(header) is OPENMETRICS
    assert negotiate("application/openmetrics-text;version=0.0.1") is TEXT
    assert negotiate("text/plain;version=1.0.0;escaping=allow-utf-8") is TEXT
    assert OPENMETRICS.content_type.startswith("application/openmetrics-text; version=1.0.0")


# -- the self-metrics encoder ---------------------------------------------------------------

# Per family type, the sample names it has (as suffixes of the family's name).
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum"),
    "info": ("_info",),
    "unknown": ("",),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
}
_label_value = st.text(
    alphabet=st.characters(exclude_categories=["Cs"]) | st.sampled_from('"\\\n{},='), max_size=8
)
_label_names = st.lists(st.sampled_from(("le", "endpoint", "code", "a", "gpu-id", "ü")), max_size=3)


# The strategies the composites below draw from, made once: a strategy made inside a
# composite is made, validated and labelled again at every draw.
_kinds = st.lists(st.sampled_from(sorted(_SUFFIXES)), max_size=4)
_family_names = st.sampled_from(("x", "seconds", "odd.name"))
_docs = st.sampled_from(("Help.", 'a "b" \\ c\nd'))
_sample_counts = st.integers(0, 4)
_label_values = {n: st.lists(_label_value, min_size=n, max_size=n) for n in range(4)}
_suffixes = {kind: st.sampled_from(suffixes) for kind, suffixes in _SUFFIXES.items()}
_numbers = st.floats() | st.integers(-(2**53), 2**53)
_timestamps = st.none() | st.sampled_from((1.5, 1700000000))
# Where OpenMetrics allows an exemplar.
_EXEMPLAR = Exemplar({"trace_id": "a"}, 0.5)
_exemplars = {
    suffix: st.none() | st.just(_EXEMPLAR if suffix in ("_total", "_bucket") else None)
    for suffixes in _SUFFIXES.values()
    for suffix in suffixes
}


@st.composite
def _families(draw: st.DrawFn) -> list[Metric]:
    families = []
    for index, kind in enumerate(draw(_kinds)):
        name = f"f{index}_{draw(_family_names)}"
        family = Metric(name, draw(_docs), kind)
        for _ in range(draw(_sample_counts)):
            names = draw(_label_names)
            values = draw(_label_values[len(names)])
            suffix = draw(_suffixes[kind])
            family.add_sample(
                name + suffix,
                dict(zip(names, values, strict=True)),
                draw(_numbers),
                draw(_timestamps),
                draw(_exemplars[suffix]),
            )
        families.append(family)
    return families


# 100 examples (derandomized under CI) reach every branch of SelfEncoder that 200 reach, and
# fail on each mutant of it that 200 fail on.
@hypothesis.settings(max_examples=100, deadline=None)
@given(families=_families())
def test_the_self_encoder_writes_what_the_encoders_write(families: list[Metric]) -> None:
    for fmt in FORMATS:
        encoder = SelfEncoder(fmt)
        try:
            theirs = fmt.encoder(Families(*families))
        except Exception:
            continue  # a family the format cannot hold (an OpenMetrics name rule)
        assert encoder(Families(*families)) == theirs
        assert encoder(Families(*families)) == theirs, "and again, from its caches"


def test_the_self_encoder_writes_the_exporters_own_registry_as_the_encoders_do() -> None:
    metrics = SelfMetrics()
    for k in range(24):
        endpoint = f"Describe{k}"
        metrics.api_requests.labels("aihc", 'pool "a"\n', endpoint, "200").inc(k)
        metrics.api_request_duration.labels("aihc", endpoint).observe(k / 7)
        metrics.api_retries.labels("aihc", endpoint).inc()
    metrics.up.labels("aihc", "pool").set(1)
    for fmt in FORMATS:
        assert SelfEncoder(fmt)(metrics.registry) == fmt.encoder(metrics.registry)


_instrument_names = st.lists(st.sampled_from(("endpoint", "code", "a", "gpu_id")), max_size=3)


_target_infos = st.none() | st.just({"cluster": 'a "b"'})
_instrument_kinds = st.lists(st.sampled_from([Counter, Gauge, Histogram, Families]), max_size=5)
_instrument_suffixes = st.sampled_from(("x", "seconds"))
_bounds = st.lists(st.floats(-10, 10), min_size=1, max_size=3, unique=True)
_children = st.integers(0, 3)
_counts = st.floats(0, 1e6) | st.sampled_from([0.0, -0.0, 1e-9, math.inf])
_exemplar_labels = st.none() | st.just({"trace_id": "a"})
_gauge_values = st.floats() | st.just(-0.0)
_observations = st.floats(-20, 20)


@st.composite
def _registries(draw: st.DrawFn) -> CollectorRegistry:
    """A registry of prometheus-client instruments, as the exporter's own metrics are made,
    and now and then something the encoder must write itself (an exemplar, target_info, an
    unlabelled instrument, a custom collector)."""
    registry = CollectorRegistry(target_info=draw(_target_infos))
    for index, kind in enumerate(draw(_instrument_kinds)):
        name = f"i{index}_{draw(_instrument_suffixes)}"
        if kind is Families:
            probe = Metric(name, "Help.", "gauge")
            probe.add_sample(name, {"x": "1"}, 1.0)
            registry.register(Families(probe))
            continue
        names = tuple(dict.fromkeys(draw(_instrument_names)))
        extra: dict[str, Any] = {}
        if kind is Histogram:
            extra["buckets"] = sorted(draw(_bounds))
        doc = draw(_docs)
        instrument = kind(name, doc, names, registry=registry, **extra)
        for _ in range(draw(_children) if names else 1):
            values = draw(_label_values[len(names)])
            child = instrument.labels(*values) if names else instrument
            number = draw(_counts)
            if kind is Counter:
                child.inc(number, exemplar=draw(_exemplar_labels))
            elif kind is Gauge:
                child.set(draw(_gauge_values))
                if draw(st.booleans()) and draw(st.booleans()):
                    child.set_function(lambda: 42.0)
            else:
                child.observe(draw(_observations))
    return registry


# 100 examples: as for the families above.
@hypothesis.settings(max_examples=100, deadline=None)
@given(registry=_registries())
def test_the_self_encoder_reads_instruments_as_the_encoders_do(registry: CollectorRegistry) -> None:
    SelfMetrics()  # as the exporter runs: no _created series
    for fmt in FORMATS:
        try:
            theirs = fmt.encoder(registry)
        except Exception:
            continue  # something the format cannot hold
        encoder = SelfEncoder(fmt)
        assert encoder(registry) == theirs
        assert encoder(registry) == theirs, "and again, from its caches"


async def test_the_self_metrics_are_rendered_again_once_old_or_when_the_store_changes() -> None:
    """Scrapes within SELF_METRICS_MAX_AGE share one rendering of the exporter's own series; an
    older one, or a store change, renders them again."""
    now = [100.0]
    store, metrics = SnapshotStore(), SelfMetrics()
    exposition = Exposition(
        store, SnapshotCollector(store.view), metrics.registry, clock=lambda: now[0]
    )
    tail = TEXT.encoder(metrics.registry)

    async def scraped() -> bytes:
        return (await exposition.payload("text/plain", gzip=False)).parts[-1]

    assert await scraped() == tail
    metrics.discovery_errors.labels("aihc", "t1").inc()
    now[0] += SELF_METRICS_MAX_AGE * 0.9
    assert await scraped() == tail  # shared
    now[0] += SELF_METRICS_MAX_AGE * 0.2
    assert b'training_exporter_discovery_errors_total{provider="aihc",target="t1"} 1.0' in (
        await scraped()
    )
    metrics.discovery_errors.labels("aihc", "t1").inc()
    store.swap(TargetSnapshot.empty("aihc", "t1"))
    await current(exposition, store)
    assert b'target="t1"} 2.0' in await scraped()


# A read of a private attribute: `x._name` (x not self or cls), getattr/hasattr/setattr of
# "_name", "_name" in vars(x), or `from prometheus_client... import _name`.
def private_reads(source: str, private: set[str]) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("getattr", "hasattr"):
            if len(node.args) > 1 and ast.unparse(node.args[1]).strip("'\"") in private:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Compare) and "vars(" in ast.unparse(node):
            if isinstance(node.left, ast.Constant) and node.left.value in private:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus_"):
            found += [alias.name for alias in node.names if alias.name.startswith("_")]
    return found


def prometheus_client_privates() -> set[str]:
    """Every `_name` prometheus-client gives an object of its own or defines in a module."""
    names: set[str] = set()
    for path in Path(prometheus_client.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names.add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name):
                names.add(node.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_private_attribute_of_prometheus_client_is_read_in_the_exporter() -> None:
    private = prometheus_client_privates()
    # What SelfEncoder once read, as it read it: each is found.
    before = """
collectors = getattr(registry, "_collector_to_names", None)
names, lock = collector._labelnames, collector._lock
if "_child_samples" in vars(child) or child._value.get_exemplar() is not None:
    pass
created = prometheus_metrics._use_created
from prometheus_client.registry import _EmptyCollector
"""
    assert len(private_reads(before, private)) == 7
    assert {"_labelnames", "_metrics", "_upper_bounds", "_target_info", "_documentation"} <= private
    package = Path(exporter.__file__).parent
    found = {
        str(path.relative_to(package)): reads
        for path in sorted(package.rglob("*.py"))
        if (reads := private_reads(path.read_text(), private))
    }
    assert found == {}
