"""From snapshots to exposition bytes, rendered off the scrape path.

`SnapshotCollector` is a prometheus-client custom collector: each `collect()` builds fresh
families from one store view, so a job that left a target's snapshot is simply not there any
more. Its renderer (`exporter.rendering`) writes the same bytes as the encoder, or hands the
render back to the encoder where they could differ (tests/rendering/test_render.py).

`Exposition` renders each store change once, in a thread, for both formats (any Accept header
maps onto one), identity and gzip, re-rendering only the parts that changed; a scrape serves
the last complete rendering and waits for none (the first excepted), with the exporter's own
series appended.

Of samples with the same labels in a family (two targets on one pool, or an upstream name that
cleans into another's), the first in view order is kept and the rest counted per provider
(`exporter.rendering.kept`, `training_exporter_duplicate_series`).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample as ClientSample

from exporter import gzipjoin
from exporter.heap import release_memory
from exporter.logs import get_logger
from exporter.metrics import DATA_SPECS, MetricSpec
from exporter.rendering import (
    TEXT_LIMIT,
    Chunk,
    Encoder,
    Families,
    FormatCheck,
    LineCache,
    Renderer,
    Rendering,
    kept,
    text_of,
)
from exporter.store import SnapshotStore, StoreView

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Format:
    encoder: Encoder
    content_type: str


TEXT = Format(*choose_encoder("text/plain;version=0.0.4"))
OPENMETRICS = Format(*choose_encoder("application/openmetrics-text;version=1.0.0"))
FORMATS = (TEXT, OPENMETRICS)


# How old the exporter's own series in a reply may be: scrapes closer together (a flood, or
# Prometheus replicas at once) share one rendering of them, which costs more than the rest of a
# cached reply. A store change renders them again at once.
SELF_METRICS_MAX_AGE = 0.01
# A sample name both formats write as it is (prometheus-client's legacy metric name).
_PLAIN_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
# Family headers and label strings kept for the self-metrics (few: endpoints x codes).
_MAX_SELF_LINES = 4096


class SelfEncoder:
    """A registry in one format, byte for byte as the format's encoder writes it: HELP/TYPE
    lines are the encoder's own, sample lines are written here when all are plain (`_lines`)."""

    def __init__(self, fmt: Format) -> None:
        self._encoder = fmt.encoder
        self._check = FormatCheck(fmt.encoder, fmt.content_type, {})
        self._trailer = self._check.trailer.encode()
        self._moved = ("_created", "_gsum", "_gcount") if fmt == TEXT else ()
        self._headers: dict[tuple[str, str, str, str], bytes] = {}
        # (family, sample name, label pairs) -> the line up to its value.
        self._starts: dict[tuple[object, ...], str] = {}
        self._values = LineCache()

    def __call__(self, registry: CollectorRegistry | Families) -> bytes:
        return b"".join([*map(self._family, registry.collect()), self._trailer])

    def _family(self, metric: Metric) -> bytes:
        lines = self._lines(metric)
        if lines is None:
            return self._encoder(Families(metric)).removesuffix(self._trailer)
        key = (metric.name, metric.type, metric.documentation, metric.unit)
        if key not in self._headers:
            if len(self._headers) >= _MAX_SELF_LINES:
                self._headers.clear()
            empty = copy.copy(metric)
            empty.samples = []
            self._headers[key] = self._encoder(Families(empty)).removesuffix(self._trailer)
        return self._headers[key] + lines

    def _lines(self, metric: Metric) -> bytes | None:
        """The family's sample lines; None unless each has a value, no timestamp, exemplar or
        native histogram, a legacy name and label names the encoder writes alike, and (in text
        0.0.4) is not one the encoder moves to a family of its own."""
        if max(len(self._starts), len(self._values.values)) >= _MAX_SELF_LINES:
            self._starts, self._values = {}, LineCache()
        starts, cache, out = self._starts, self._values, []
        for s in metric.samples:
            if s.value is None or s.timestamp is not None or s.exemplar or s.native_histogram:
                return None
            key = (metric.name, s.name, *s.labels.items())
            start = starts.get(key)
            if start is None:
                names, moved = tuple(s.labels), (metric.name + m for m in self._moved)
                plain = _PLAIN_NAME.fullmatch(s.name) and s.name not in moved
                if not plain or not self._check.names_alike(names):
                    return None
                start = starts[key] = f"{s.name}{cache.label(names, tuple(s.labels.values()))} "
            out.append(f"{start}{cache.value(s.value)}\n")
        return "".join(out).encode()


def negotiate(accept: str) -> Format:
    """OpenMetrics 1.0.0 where prometheus-client would answer in OpenMetrics, else text 0.0.4."""
    try:
        _, content_type = choose_encoder(accept)
    except Exception:  # a client's header: the default format answers it
        return TEXT
    return OPENMETRICS if content_type.startswith("application/openmetrics-text") else TEXT


class SnapshotCollector:
    """Every job, pod and resource family of the targets in a store view (docs/metrics.md)."""

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
        self,
        formats: Iterable[tuple[Encoder, str]],
        report: bool = True,
        text_limit: int = TEXT_LIMIT,
    ) -> Renderer:
        """A `Renderer` of this collector's families in `formats`; `report`: it tells
        `on_duplicates`; `text_limit`: bytes of lines above which it keeps their deflate alone."""
        checks = [FormatCheck(encoder, ct, self.help) for encoder, ct in formats]
        on_duplicates = self.on_duplicates if report else None
        return Renderer(self.specs, checks, self.encode, on_duplicates, text_limit=text_limit)

    def encode(self, view: StoreView, encoder: Encoder) -> bytes:
        """The encoder's own rendering of `view` (the fallback)."""
        return encoder(Families(*self.collect(view)))

    def render(self, view: StoreView, encoder: Encoder, content_type: str) -> bytes:
        """Exactly `encoder(<collector of collect(view)>)`, in a fraction of its time."""
        renderer = self.renderer([(encoder, content_type)], report=False)
        (rendering,) = renderer.render(view)
        return b"".join(rendering.text()) + encoder(Families())


@dataclass(frozen=True, slots=True)
class Payload:
    """One scrape's reply: the cached parts and the self-metrics, never joined, so that a
    scrape does not copy ~20 MB (see `exporter.server.PayloadBody`); a chunk that keeps no
    text is inflated as the reply is written (`pieces`)."""

    parts: tuple[bytes | Chunk, ...]
    content_type: str
    gzipped: bool

    @property
    def size(self) -> int:
        return sum(len(part) for part in self.parts)

    def pieces(self, inflated: Callable[[int], None] | None = None) -> Iterator[bytes]:
        """The reply's bytes, part by part; `inflated` is told the length of each part
        inflated from its deflate."""
        return (text_of(part, inflated) for part in self.parts)


@dataclass(slots=True)
class _Tail:
    """The self-metrics in one format, rendered at `at` for a store version, and what ends a
    gzip reply with them (made by the first gzip scrape that serves them)."""

    at: float
    version: int
    text: bytes
    gzip_end: bytes | None = None


class Exposition:
    """The store's latest rendering in both formats, made off the scrape path, and the
    self-metrics, rendered at most SELF_METRICS_MAX_AGE before a scrape."""

    def __init__(
        self,
        store: SnapshotStore,
        collector: SnapshotCollector,
        self_registry: CollectorRegistry,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._clock = clock
        self._self_registry = self_registry
        self._renderer = collector.renderer([(f.encoder, f.content_type) for f in FORMATS])
        self._self_encoders = tuple(SelfEncoder(f) for f in FORMATS)
        # Per format: the self-metrics last rendered.
        self._tails: list[_Tail | None] = [None] * len(FORMATS)
        # One render at a time, even if a cancelled task's thread is still running.
        self._render_lock = threading.Lock()
        # (store version, one rendering per FORMATS): replaced whole, never changed.
        self._latest: tuple[int, tuple[Rendering, ...]] | None = None
        self._task: asyncio.Task[None] | None = None
        # A version whose render raised: not tried again until the store changes.
        self._failed: int | None = None
        store.on_swap(self._changed)

    async def payload(self, accept: str, gzip: bool) -> Payload:
        chosen = negotiate(accept)
        self._start()
        # Before the first rendering of all there is nothing to serve: it is waited for.
        if self._latest is None and not await self.holds(0, math.inf):
            raise RuntimeError("the store could not be rendered")
        latest = self._latest
        assert latest is not None
        index = FORMATS.index(chosen)
        rendering = latest[1][index]
        tail = self._self_metrics(index, latest[0])
        if not gzip:
            return Payload((*rendering.parts, tail.text), chosen.content_type, False)
        if tail.gzip_end is None:
            _, tail.gzip_end = gzipjoin.finish(rendering.deflated, tail.text, rendering.gzip_level)
        parts = (gzipjoin.HEADER, rendering.deflated.raw, tail.gzip_end)
        return Payload(parts, chosen.content_type, True)

    def _self_metrics(self, index: int, version: int) -> _Tail:
        """The self-metrics in FORMATS[index], rendered again once SELF_METRICS_MAX_AGE old or
        when the store's version changed (and with it the rendering they follow)."""
        now = self._clock()
        cached = self._tails[index]
        if (
            cached is not None
            and cached.version == version
            and now - cached.at < SELF_METRICS_MAX_AGE
        ):
            return cached
        tail = self._tails[index] = _Tail(
            now, version, self._self_encoders[index](self._self_registry)
        )
        return tail

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

    def _rendered_version(self) -> int | None:
        return self._latest[0] if self._latest is not None else None

    def _changed(self, view: StoreView) -> None:
        # No loop (a benchmark filling the store): `_start` raises, and the first scrape renders.
        with contextlib.suppress(RuntimeError):
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
            # Trimmed once the rendering this one replaces is gone, so its pages go back too.
            del view, renderings
            await asyncio.to_thread(release_memory)

    def _render(self, view: StoreView) -> tuple[Rendering, ...]:
        with self._render_lock:
            return self._renderer.render(view)
