"""From snapshots to exposition bytes, rendered off the scrape path.

`SnapshotCollector` is a prometheus-client custom collector: each `collect()` builds fresh
metric families from one store view, so a job that left a target's snapshot is simply not
there any more. Its `render` writes the same bytes as the encoder in a fraction of the time
(`exporter.rendering`: sample lines per part, the family's HELP/TYPE lines from the encoder,
a probe of every character the formats escape; any difference hands the render back to the
encoder). See tests/test_render.py and bench/README.md.

`Exposition` renders each store change once, in a thread, for both formats, identity and gzip,
re-rendering only the parts that changed; a scrape serves the last complete rendering and
waits for none (the first rendering of all excepted), and renders only the exporter's own few
dozen series, appended. At 100k series, with 4 jobs changing every second, a gzip scrape's p99
went from 137-175 to 2.7-3.2 times nginx's serving the same bytes (bench/churn.py).

Content types are a closed set: text 0.0.4 and OpenMetrics 1.0.0. Any Accept header maps onto
one of them (prometheus-client's `choose_encoder` made a content type of every OpenMetrics
`version=` a client wrote), so what is cached is two immutable renderings, whoever scrapes.

The duplicate guard is `exporter.rendering.kept`: a family never holds two samples with the
same labels; the first in view order wins (targets by (provider, target), then jobs and parts
as the snapshot holds them) and the rest are counted per provider (`on_duplicates`,
`training_exporter_duplicate_series`). Cleaning labels does not make such pairs (see
`exporter.providers.kit.labels`); two targets on one resource pool, or an upstream name that
is itself a cleaned form of another, still can: Prometheus 2.42 silently merged 14 such
`training_pod_info` lines into 9 series.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample as ClientSample
from prometheus_client.utils import floatToGoString

from exporter import gzipjoin
from exporter.heap import release_memory
from exporter.logs import get_logger
from exporter.metrics import DATA_SPECS, MetricSpec
from exporter.rendering import Encoder, Families, FormatCheck, LineCache, Renderer, Rendering, kept
from exporter.store import SnapshotStore, StoreView

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Format:
    encoder: Encoder
    content_type: str


TEXT = Format(*choose_encoder("text/plain;version=0.0.4"))
OPENMETRICS = Format(*choose_encoder("application/openmetrics-text;version=1.0.0"))
FORMATS = (TEXT, OPENMETRICS)


# A sample name both formats write as it is (prometheus-client's legacy metric name).
_PLAIN_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Family headers and label strings kept for the self-metrics: their label sets are few
# (endpoints x codes).
_MAX_SELF_LINES = 4096
_format_value: Callable[[float], str] = floatToGoString


class SelfEncoder:
    """A registry in one format, byte for byte as the format's encoder writes it, in a
    fraction of its time (the self-metrics of a target polling 24 endpoints: 2.8 -> 1.8 ms in
    text 0.0.4, 7.2 -> 2.5 ms in OpenMetrics, what Prometheus 3 asks for first).

    Each family's HELP/TYPE lines are the encoder's own (once per family). Its sample lines
    are written here when every one is plain: no timestamp, exemplar or native histogram, a
    legacy name, label names the encoder writes alike (`FormatCheck.names_alike`), and, in
    the text format, none that the encoder moves to a family of its own (`_created`,
    `_gsum`, `_gcount`); otherwise the encoder writes the family.

    A registry's labelled counters, gauges and histograms are read from their children, as
    their `collect()` would read them, without building its Metric and Sample objects: 81
    self-metric lines (bench.serve's registry) took 222-311 us, then 80-126 us, of a
    1-connection gzip scrape at 100k series whose median is about 1 ms.
    Anything else (an exemplar, `_created` series, another collector, a target_info) is
    collected as prometheus-client does.
    """

    def __init__(self, fmt: Format) -> None:
        self._encoder = fmt.encoder
        self._check = FormatCheck(fmt.encoder, fmt.content_type, {})
        self._trailer = self._check.trailer.encode()
        self._moved = ("_created", "_gsum", "_gcount") if fmt == TEXT else ()
        self._headers: dict[tuple[str, str, str, str], bytes] = {}
        self._labels = LineCache()
        self._plain: dict[str, bool] = {}

    def __call__(self, registry: Any) -> bytes:
        collectors = getattr(registry, "_collector_to_names", None)
        if collectors is None or getattr(registry, "_target_info", True) or _created_on():
            out = [self._family(metric) for metric in registry.collect()]
        else:
            out = []
            for collector in list(collectors):
                lines = self._direct(collector)
                out += [lines] if lines is not None else map(self._family, collector.collect())
        out.append(self._trailer)
        return b"".join(out)

    def _direct(self, collector: Any) -> bytes | None:
        """A labelled instrument's family read from its children; None: collect() it."""
        try:
            samples = _children_samples(collector, self._labels.value)
            key = (collector._name, collector._type, collector._documentation, collector._unit)
        except AttributeError:  # a prometheus-client whose instruments are built otherwise
            return None
        lines = None if samples is None else self._sample_lines(samples)
        if lines is None:
            return None
        return self._header(key) + lines

    def _family(self, metric: Metric) -> bytes:
        lines = self._lines(metric)
        if lines is None:
            return self._encoder(Families(metric)).removesuffix(self._trailer)
        key = (metric.name, metric.type, metric.documentation, metric.unit)
        return self._header(key, metric) + lines

    def _header(self, key: tuple[str, str, str, str], metric: Metric | None = None) -> bytes:
        """The family's HELP/TYPE lines for `key` (name, type, help, unit), written from
        `metric`, or from a Metric of `key` when there is none (an instrument read directly)."""
        header = self._headers.get(key)
        if header is None:
            if len(self._headers) >= _MAX_SELF_LINES:
                self._headers.clear()
            if metric is None:
                name, kind, documentation, unit = key
                metric = Metric(name, documentation, kind, unit)
            empty = copy.copy(metric)
            empty.samples = []
            header = self._encoder(Families(empty)).removesuffix(self._trailer)
            self._headers[key] = header
        return header

    def _lines(self, metric: Metric) -> bytes | None:
        moved = tuple(metric.name + suffix for suffix in self._moved)
        for s in metric.samples:
            if (
                s.timestamp is not None
                or s.exemplar is not None
                or s.native_histogram is not None
                or s.value is None
                or s.name in moved
            ):
                return None
        return self._sample_lines(
            [(s.name, tuple(s.labels), tuple(s.labels.values()), s.value) for s in metric.samples]
        )

    def _sample_lines(self, samples: list[_Line]) -> bytes | None:
        """Plain samples' lines, or None if one has a name or label names the encoder
        writes otherwise."""
        labels = self._labels
        if len(labels.labels) >= _MAX_SELF_LINES or len(labels.values) >= _MAX_SELF_LINES:
            labels.labels.clear()
            labels.values.clear()
        plain = self._plain
        if len(plain) >= _MAX_SELF_LINES:
            plain.clear()
        out: list[str] = []
        for name, names, values, value in samples:
            alike = plain.get(name)
            if alike is None:
                alike = plain[name] = _PLAIN_NAME.fullmatch(name) is not None
            if not alike or not self._check.names_alike(names):
                return None
            out.append(f"{name}{labels.label(names, values)} {labels.value(value)}\n")
        return "".join(out).encode()


# (sample name, label names, label values, value): a sample line to write.
_Line = tuple[str, tuple[str, ...], tuple[str, ...], float]


def _created_on() -> bool:
    """Whether prometheus-client writes `_created` series (`disable_created_metrics`)."""
    return bool(getattr(prometheus_metrics, "_use_created", True))


_DIRECT = (prometheus_metrics.Counter, prometheus_metrics.Gauge, prometheus_metrics.Histogram)


def _children_samples(collector: Any, text: Callable[[float], str]) -> list[_Line] | None:
    """A labelled counter's, gauge's or histogram's samples, in `collect()`'s order, read
    from its children; None for anything else, or if a child holds an exemplar or a function."""
    kind = type(collector)
    if kind not in _DIRECT:
        return None
    names = collector._labelnames
    if not names or collector._labelvalues:
        return None
    with collector._lock:
        children = list(collector._metrics.items())
    name = collector._name
    out: list[_Line] = []
    if kind is prometheus_metrics.Histogram:
        bucket_names = (*names, "le")
        for values, child in children:
            total = 0.0
            for bound, bucket in zip(child._upper_bounds, child._buckets, strict=True):
                if bucket.get_exemplar() is not None:
                    return None
                total += bucket.get()
                out.append((f"{name}_bucket", bucket_names, (*values, text(bound)), total))
            out.append((f"{name}_count", names, values, total))
            if child._upper_bounds[0] >= 0:
                out.append((f"{name}_sum", names, values, child._sum.get()))
        return out
    counter = kind is prometheus_metrics.Counter
    suffix = "_total" if counter else ""
    for values, child in children:
        # A gauge child given `set_function` answers from that function, not its value.
        if "_child_samples" in vars(child) or (counter and child._value.get_exemplar() is not None):
            return None
        out.append((name + suffix, names, values, child._value.get()))
    return out


def negotiate(accept: str) -> Format:
    """The format for an Accept header: OpenMetrics 1.0.0 where prometheus-client would answer
    in any OpenMetrics, text 0.0.4 otherwise (a version it cannot parse included)."""
    try:
        _, content_type = choose_encoder(accept)
    except Exception:  # a client's header: the default format answers it
        return TEXT
    return OPENMETRICS if content_type.startswith("application/openmetrics-text") else TEXT


def format_interval(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


class SnapshotCollector:
    """Every job, pod and resource family of the targets in a store view.

    Exposition (one job, AIHC; HELP abridged)::

        # HELP training_job_status Job status as a state set: 1 for the current status. ...
        # TYPE training_job_status gauge
        training_job_status{job_id="job-1",provider="aihc",queue="default",\
resource_pool="cce-1",status="Running"} 1.0
        training_job_status{job_id="job-1",provider="aihc",queue="default",\
resource_pool="cce-1",status="Failed"} 0.0
        # HELP training_pod_gpu_utilization_ratio Latest sample of the pod's GPU utilisation...
        # TYPE training_pod_gpu_utilization_ratio gauge
        training_pod_gpu_utilization_ratio{job_id="job-1",pod="job-1-worker-0",...} 0.875
    """

    def __init__(
        self,
        view: Callable[[], StoreView],
        specs: Iterable[MetricSpec] = DATA_SPECS,
        on_duplicates: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        self._view = view
        # Told, once per rendering, how many samples each provider lost to an earlier one
        # with the same labels.
        self.on_duplicates = on_duplicates
        self.specs = tuple(specs)
        # Each family's refresh tier (and so its age) is the target's: the gauges say it.
        note = " Read from the provider in refresh tiers: training_exporter_tier_interval_seconds."
        self.help = {s.name: s.help + note for s in self.specs}
        self._spec_by_name = {s.name: s for s in self.specs}
        # Renders handed back to the encoder because its lines would differ from ours.
        self.fallbacks = 0

    def collect(self, view: StoreView | None = None) -> Iterator[Metric]:
        view = view if view is not None else self._view()
        families = {
            spec.name: Metric(spec.family, self.help[spec.name], spec.kind) for spec in self.specs
        }
        seen: dict[str, set[str]] = {}
        cache = LineCache()
        dropped: Counter[str] = Counter()
        samples = (
            s
            for snapshot in view.snapshots.values()
            for job in snapshot.jobs.values()
            for part in job.parts.values()
            for s in part.samples
        )
        for s, _ in kept(samples, families, seen, cache, dropped):
            labels = dict(zip(s.label_names, s.label_values))
            families[s.name].samples.append(ClientSample(s.name, labels, s.value))
        for family in families.values():
            if family.samples:
                yield family

    def renderer(
        self, formats: Iterable[tuple[Encoder, str]], gzip_level: int = 6, report: bool = True
    ) -> Renderer:
        """A `Renderer` of this collector's families in `formats`; `report`: it tells
        `on_duplicates`."""
        checks = [FormatCheck(encoder, ct, self.help) for encoder, ct in formats]
        return Renderer(
            self.specs,
            checks,
            self.encode,
            self.on_duplicates if report else None,
            gzip_level,
        )

    def encode(self, view: StoreView, encoder: Encoder) -> bytes:
        """The encoder's own rendering of `view` (the fallback)."""
        self.fallbacks += 1
        return encoder(_ViewCollector(self, view))

    def render(self, view: StoreView, encoder: Encoder, content_type: str) -> bytes:
        """Exactly `encoder(<collector of collect(view)>)`, in a fraction of its time."""
        renderer = self.renderer([(encoder, content_type)], report=False)
        (rendering,) = renderer.render(view)
        return b"".join(rendering.parts) + encoder(Families())


class _ViewCollector:
    def __init__(self, collector: SnapshotCollector, view: StoreView) -> None:
        self._collector = collector
        self._view = view

    def collect(self) -> Iterator[Metric]:
        return self._collector.collect(self._view)


@dataclass(frozen=True, slots=True)
class Payload:
    """One scrape's reply: the cached parts (family headers and sample lines) and this
    scrape's self-metrics, never joined, so that a scrape does not copy ~20 MB (see
    `exporter.server.PayloadBody`)."""

    parts: tuple[bytes, ...]
    content_type: str
    gzipped: bool

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)

    @property
    def size(self) -> int:
        return sum(len(part) for part in self.parts)


class Exposition:
    """The store's latest rendering in both formats, made off the scrape path, and the
    self-metrics registry rendered per scrape."""

    def __init__(
        self,
        store: SnapshotStore,
        collector: SnapshotCollector,
        self_registry: CollectorRegistry,
        gzip_level: int = 6,
    ) -> None:
        self._store = store
        self._collector = collector
        self._self_registry = self_registry
        self._gzip_level = gzip_level
        self._renderer = collector.renderer([(f.encoder, f.content_type) for f in FORMATS])
        self._self_encoders = tuple(SelfEncoder(f) for f in FORMATS)
        # One render at a time, even if a cancelled task's thread is still running.
        self._render_lock = threading.Lock()
        # (store version, one rendering per FORMATS): replaced whole, never changed.
        self._latest: tuple[int, tuple[Rendering, ...]] | None = None
        self._task: asyncio.Task[None] | None = None
        # A version whose render raised: not tried again until the store changes.
        self._failed: int | None = None
        self.renders = 0
        store.on_swap(self._changed)

    def render_view(self, view: StoreView, accept: str = "") -> tuple[bytes, str]:
        """Render a view synchronously (benchmarks, tests); no cache."""
        chosen = negotiate(accept)
        return self._collector.render(view, chosen.encoder, chosen.content_type), (
            chosen.content_type
        )

    async def payload(self, accept: str, gzip: bool) -> Payload:
        chosen = negotiate(accept)
        self._start()
        latest = self._latest
        if latest is None:
            # The first rendering of all: nothing to serve before it.
            assert self._task is not None
            await asyncio.shield(self._task)
            latest = self._latest
            if latest is None:
                raise RuntimeError("the store could not be rendered")
        rendering = latest[1][FORMATS.index(chosen)]
        tail = self._self_encoders[FORMATS.index(chosen)](self._self_registry)
        if not gzip:
            return Payload((*rendering.parts, tail), chosen.content_type, False)
        head, end = gzipjoin.finish(rendering.deflated, tail, self._gzip_level)
        return Payload((head, rendering.deflated.raw, end), chosen.content_type, True)

    async def current(self) -> None:
        """Until the latest rendering is of the store's current version: for a caller that
        must see its own change (a test that polls, then scrapes); scrapes never wait."""
        while (version := self._store.view().version) != self._rendered_version():
            self._start()
            if self._task is None or version == self._failed:
                raise RuntimeError("the store could not be rendered")
            await asyncio.shield(self._task)

    async def holds(self, version: int, timeout: float) -> bool:
        """Whether scrapes get a rendering of `version` of the store or later, waiting up to
        `timeout` for the renders under way."""
        deadline = time.monotonic() + timeout
        while (rendered := self._rendered_version()) is None or rendered < version:
            self._start()
            task, left = self._task, deadline - time.monotonic()
            if task is None or task.done() or left <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), left)
        return True

    @property
    def cached_renderings(self) -> int:
        latest = self._latest
        return len(latest[1]) if latest is not None else 0

    def _rendered_version(self) -> int | None:
        latest = self._latest
        return latest[0] if latest is not None else None

    def _changed(self, view: StoreView) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a benchmark filling the store): the first scrape renders
        self._start()

    def _start(self) -> None:
        """Render the current version in a task unless one is running or it is rendered."""
        version = self._store.view().version
        if version in (self._rendered_version(), self._failed):
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._render_until_current())

    async def _render_until_current(self) -> None:
        while True:
            view = self._store.view()
            if view.version in (self._rendered_version(), self._failed):
                return
            try:
                renderings = await asyncio.to_thread(self._render, view)
            except Exception:
                self._failed = view.version
                log.exception("rendering the store failed", version=view.version)
                return
            self._latest = (view.version, renderings)
            # The heap is trimmed once the rendering it replaces is gone, not before: at 100k
            # series, RSS once 5 full polls were rendered went from 186-193 to 164-169 MiB.
            del view, renderings
            await asyncio.to_thread(release_memory)

    def _render(self, view: StoreView) -> tuple[Rendering, ...]:
        with self._render_lock:
            renderings = self._renderer.render(view)
        self.renders += 1
        return renderings


def accepts_gzip(accept_encoding: str) -> bool:
    for item in accept_encoding.split(","):
        token, _, params = item.strip().partition(";")
        if token.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip().removeprefix("q=")
        if not params or not quality or quality.strip() not in ("0", "0.0", "0.00", "0.000"):
            return True
    return False
