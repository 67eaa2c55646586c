"""From snapshots to exposition bytes.

`SnapshotCollector` is a prometheus-client custom collector: each `collect()` builds fresh
metric families from one store view, so a job that left a target's snapshot is simply not
there any more. `Exposition` renders a view once per store version and content type and
serves the cached bytes (and a cached gzip stream) to every scrape until the next swap; only
the exporter's own few dozen series are rendered per scrape and appended.

At 100k series prometheus-client's encoders spend ~9 µs a series (a dict and a Sample per
series, then per label a name check, an escape and a format), so `SnapshotCollector` writes
the same bytes itself: the sample lines once per store version for every format
(`sample_lines`: each label set's string and each value's once), each family's HELP/TYPE lines
from the encoder, and for every family and label-name tuple a probe (quotes, backslashes,
newlines, unicode) rendered both ways; any difference sends the whole render to the encoder
(`render_parts`). See tests/test_render.py and bench/README.md.

Every sample passes `sample_lines` (and `collect`) once per store version, so that is where the
last guard sits: a family never holds two samples with the same labels. The first one in view
order wins (targets by (provider, target), then jobs and parts as the snapshot holds them) and
the rest are counted per provider (`on_duplicates`, `training_exporter_duplicate_series`).
Cleaning labels does not make such pairs (see `exporter.providers.kit.labels`); two targets on
one resource pool, or an upstream name that is itself a cleaned form of another, still can:
Prometheus 2.42 silently merged 14 such `training_pod_info` lines into 9 series.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample as ClientSample
from prometheus_client.utils import floatToGoString

from exporter.metrics import DATA_SPECS, MetricSpec
from exporter.store import SnapshotStore, StoreView

Encoder = Callable[[Any], bytes]
# Every character the formats escape, and some they must not.
_PROBE_VALUE = 'say "hi"\\ C:\\dir\\n\nline two ü ✓ \u2028 {},='
_PROBE_NUMBER = 0.125
# Content types remembered; the Accept header can make any number of them.
_MAX_CONTENT_TYPES = 16
_MAX_RENDERINGS = 4
# prometheus-client's own value formatting (untyped there).
_format_value: Callable[[float], str] = floatToGoString


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
        poll_interval: float,
        specs: Iterable[MetricSpec] = DATA_SPECS,
        on_duplicates: Callable[[Mapping[str, int]], None] | None = None,
    ) -> None:
        self._view = view
        # Told, once per rendered store version, how many samples each provider lost to an
        # earlier one with the same labels.
        self._on_duplicates = on_duplicates
        self._specs = tuple(specs)
        note = f" Polled from the provider every {format_interval(poll_interval)}."
        self._help = {s.name: s.help + note for s in self._specs}
        self._spec_by_name = {s.name: s for s in self._specs}
        # Per content type: family headers, label-name tuples checked, trailer.
        self._headers: dict[tuple[str, str], str | None] = {}
        self._label_names: dict[tuple[str, tuple[str, ...]], bool] = {}
        self._trailers: dict[str, str] = {}
        # Renders handed back to the encoder because its lines would differ from ours.
        self.fallbacks = 0

    def collect(self, view: StoreView | None = None) -> Iterator[Metric]:
        view = view if view is not None else self._view()
        families = {
            spec.name: Metric(spec.family, self._help[spec.name], spec.kind) for spec in self._specs
        }
        used: dict[str, set[str]] = {name: set() for name in families}
        for snapshot in view.snapshots.values():
            for job in snapshot.jobs.values():
                for part in job.parts.values():
                    for s in part.samples:
                        family = families.get(s.name)
                        if family is None:
                            continue
                        label = _label_string(s.label_names, s.label_values)
                        if label in used[s.name]:
                            continue
                        used[s.name].add(label)
                        family.samples.append(
                            ClientSample(s.name, dict(zip(s.label_names, s.label_values)), s.value)
                        )
        for family in families.values():
            if family.samples:
                yield family

    def render(self, view: StoreView, encoder: Encoder, content_type: str) -> bytes:
        """Exactly `encoder(<collector of collect(view)>)`, in a fraction of its time."""
        return b"".join(self.render_parts(view, encoder, content_type))

    def sample_lines(self, view: StoreView) -> SampleLines:
        """Every family's sample lines, the part of a rendering that all formats share."""
        # Lines as small bytes (pymalloc's, given back to the system whole) joined once per
        # family: a growing buffer per family left glibc's heap fragmented after each render.
        lines: dict[str, list[bytes]] = {name: [] for name in self._spec_by_name}
        # Per family, the label strings it already has: the duplicate guard.
        used: dict[str, set[str]] = {name: set() for name in self._spec_by_name}
        labels: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
        label_names: set[tuple[str, ...]] = set()
        values: dict[float, str] = {}
        duplicates: dict[str, int] = {}
        for snapshot in view.snapshots.values():
            for job in snapshot.jobs.values():
                for part in job.parts.values():
                    for name, names, label_values, number in part.samples:
                        family = lines.get(name)
                        if family is None:
                            continue
                        key = (names, label_values)
                        label = labels.get(key)
                        if label is None:
                            label_names.add(names)
                            label = labels[key] = _label_string(names, label_values)
                        seen = used[name]
                        if label in seen:
                            provider = snapshot.provider
                            duplicates[provider] = duplicates.get(provider, 0) + 1
                            continue
                        seen.add(label)
                        value = values.get(number)
                        if value is None:
                            value = _format_value(number)
                            # Not 0: 0.0 == -0.0 but they print differently.
                            if number:
                                values[number] = value
                        family.append(f"{name}{label} {value}\n".encode())
        blocks = {name: b"".join(family) for name, family in lines.items() if family}
        if self._on_duplicates is not None:
            self._on_duplicates(duplicates)
        return SampleLines(view.version, blocks, frozenset(label_names))

    def render_parts(
        self,
        view: StoreView,
        encoder: Encoder,
        content_type: str,
        lines: SampleLines | None = None,
    ) -> list[bytes]:
        """`render` in pieces: each family's header and lines, then the format's trailer
        (`# EOF` or empty). `lines`, from `sample_lines(view)`, may be shared between content
        types: their renderings then share the bytes of every sample line."""
        lines = lines if lines is not None else self.sample_lines(view)
        if not all(self._names_render_alike(encoder, content_type, n) for n in lines.label_names):
            return self._fallback(view, encoder, content_type)
        out: list[bytes] = []
        for name, block in lines.families.items():
            header = self._header(encoder, content_type, self._spec_by_name[name])
            if header is None:
                return self._fallback(view, encoder, content_type)
            out += (header.encode(), block)
        out.append(self._trailer(encoder, content_type).encode())
        return out

    def _fallback(self, view: StoreView, encoder: Encoder, content_type: str) -> list[bytes]:
        self.fallbacks += 1
        body = encoder(_ViewCollector(self, view))
        trailer = self._trailer(encoder, content_type).encode()
        return [body.removesuffix(trailer), trailer]

    def _header(self, encoder: Encoder, content_type: str, spec: MetricSpec) -> str | None:
        """The family's HELP/TYPE lines as `encoder` writes them; None if its sample lines differ
        from ours (a name it would escape)."""
        key = (content_type, spec.name)
        if key not in self._headers:
            empty = Metric(spec.family, self._help[spec.name], spec.kind)
            trailer = self._trailer(encoder, content_type)
            header = encoder(_Families(empty)).decode().removesuffix(trailer)
            probe = Metric(spec.family, self._help[spec.name], spec.kind)
            probe.add_sample(spec.name, {"probe": _PROBE_VALUE}, _PROBE_NUMBER)
            label = _label_string(("probe",), (_PROBE_VALUE,))
            line = f"{spec.name}{label} {_format_value(_PROBE_NUMBER)}\n"
            alike = encoder(_Families(probe)).decode() == header + line + trailer
            self._headers[key] = header if alike else None
        return self._headers[key]

    def _names_render_alike(
        self, encoder: Encoder, content_type: str, names: tuple[str, ...]
    ) -> bool:
        key = (content_type, names)
        if key not in self._label_names:
            values = tuple(f"{_PROBE_VALUE}{i}" for i in range(len(names)))
            probe = Metric("probe", "Probe.", "gauge")
            probe.add_sample("probe", dict(zip(names, values)), _PROBE_NUMBER)
            empty = encoder(_Families(Metric("probe", "Probe.", "gauge"))).decode()
            trailer = self._trailer(encoder, content_type)
            line = f"probe{_label_string(names, values)} {_format_value(_PROBE_NUMBER)}\n"
            expected = empty.removesuffix(trailer) + line + trailer
            self._label_names[key] = encoder(_Families(probe)).decode() == expected
        return self._label_names[key]

    def _trailer(self, encoder: Encoder, content_type: str) -> str:
        """What the encoder ends every exposition with: `# EOF` in OpenMetrics."""
        if content_type not in self._trailers:
            if len(self._trailers) >= _MAX_CONTENT_TYPES:
                # Clients choose content types (any OpenMetrics version makes one): start over.
                self._headers.clear()
                self._label_names.clear()
                self._trailers.clear()
            self._trailers[content_type] = encoder(_Families()).decode()
        return self._trailers[content_type]


def _escape_label_value(value: str) -> str:
    # prometheus-client's escaping of label values, the same in text 0.0.4 and OpenMetrics.
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _label_string(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`{a="1",b="2"}` as prometheus-client writes `dict(zip(names, values))`: sorted by name."""
    pairs = sorted(dict(zip(names, values)).items())
    if not pairs:
        return ""
    return "{" + ",".join([f'{k}="{_escape_label_value(v)}"' for k, v in pairs]) + "}"


@dataclass(frozen=True, slots=True)
class SampleLines:
    """A view's sample lines per family (spec order), as prometheus-client writes them when it
    leaves names alone; which label-name tuples they use, to check that for a format."""

    version: int
    families: dict[str, bytes]
    label_names: frozenset[tuple[str, ...]]


class _Families:
    """A collector of given families, to ask an encoder how it writes them."""

    def __init__(self, *families: Metric) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class _ViewCollector:
    def __init__(self, collector: SnapshotCollector, view: StoreView) -> None:
        self._collector = collector
        self._view = view

    def collect(self) -> Iterator[Metric]:
        return self._collector.collect(self._view)


@dataclass(slots=True)
class _Rendered:
    version: int
    # The exposition without its trailer: the self-metrics part brings `# EOF`.
    parts: tuple[bytes, ...]
    # A gzip stream of `parts`, flushed but not finished: copy it to append the self-metrics.
    gzip_prefix: bytes | None = None
    gzip_state: Any = None


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
    """Cached rendering of a store, plus the self-metrics registry rendered per scrape."""

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
        self._cache: dict[str, _Rendered] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        # The current version's sample lines, shared by the renderings of every content type.
        self._lines: SampleLines | None = None
        self.renders = 0
        store.on_swap(self._forget_stale)

    def render_view(self, view: StoreView, accept: str = "") -> tuple[bytes, str]:
        """Render a view synchronously (benchmarks, tests); no cache."""
        encoder, content_type = choose_encoder(accept)
        return self._collector.render(view, encoder, content_type), content_type

    async def payload(self, accept: str, gzip: bool) -> Payload:
        encoder, content_type = choose_encoder(accept)
        rendered = await self._data_part(encoder, content_type, gzip)
        tail = encoder(self._self_registry)
        if not gzip:
            return Payload((*rendered.parts, tail), content_type, False)
        state = rendered.gzip_state.copy()
        tail = state.compress(tail) + state.flush()
        return Payload((rendered.gzip_prefix or b"", tail), content_type, True)

    async def _data_part(
        self, encoder: Callable[[Any], bytes], content_type: str, gzip: bool
    ) -> _Rendered:
        view = self._store.view()
        cached = self._cache.get(content_type)
        if (
            cached is not None
            and cached.version == view.version
            and (not gzip or cached.gzip_state is not None)
        ):
            return cached
        lock = self._locks.setdefault(content_type, asyncio.Lock())
        async with lock:
            view = self._store.view()
            cached = self._cache.get(content_type)
            if cached is None or cached.version != view.version:
                cached = await asyncio.to_thread(self._render, encoder, content_type, view)
                self._keep(content_type, cached)
            if gzip and cached.gzip_state is None:
                await asyncio.to_thread(self._compress, cached)
            return cached

    def _forget_stale(self, view: StoreView) -> None:
        # A swap makes every cached rendering stale: let them go now rather than at the next
        # render, so that two generations of ~20 MB renderings never coexist.
        for key in [k for k, r in self._cache.items() if r.version != view.version]:
            del self._cache[key]
        if self._lines is not None and self._lines.version != view.version:
            self._lines = None

    @property
    def cached_renderings(self) -> int:
        return len(self._cache)

    def _keep(self, content_type: str, rendered: _Rendered) -> None:
        """Cache a rendering of the current store version, and only a few (each OpenMetrics
        version a client names is a content type of its own)."""
        self._cache.pop(content_type, None)
        if rendered.version != self._store.view().version:
            return
        self._cache[content_type] = rendered
        while len(self._cache) > _MAX_RENDERINGS:
            del self._cache[next(iter(self._cache))]
        for key in [k for k, lock in self._locks.items() if k not in self._cache]:
            if not self._locks[key].locked():
                del self._locks[key]

    def _render(self, encoder: Encoder, content_type: str, view: StoreView) -> _Rendered:
        lines = self._lines
        if lines is None or lines.version != view.version:
            lines = self._collector.sample_lines(view)
            if view.version == self._store.view().version:
                self._lines = lines
        parts = self._collector.render_parts(view, encoder, content_type, lines)
        self.renders += 1
        return _Rendered(view.version, tuple(parts[:-1]))

    def _compress(self, rendered: _Rendered) -> None:
        compressor = zlib.compressobj(self._gzip_level, zlib.DEFLATED, 31)
        prefix = [compressor.compress(part) for part in rendered.parts]
        prefix.append(compressor.flush(zlib.Z_SYNC_FLUSH))
        rendered.gzip_prefix, rendered.gzip_state = b"".join(prefix), compressor


def accepts_gzip(accept_encoding: str) -> bool:
    for item in accept_encoding.split(","):
        token, _, params = item.strip().partition(";")
        if token.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip().removeprefix("q=")
        if not params or not quality or quality.strip() not in ("0", "0.0", "0.00", "0.000"):
            return True
    return False
