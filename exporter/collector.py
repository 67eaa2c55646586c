"""From snapshots to exposition bytes.

`SnapshotCollector` is a prometheus-client custom collector: each `collect()` builds fresh
metric families from one store view, so a job that left a target's snapshot is simply not
there any more. `Exposition` renders a view once per store version and content type and
serves the cached bytes (and a cached gzip stream) to every scrape until the next swap; only
the exporter's own few dozen series are rendered per scrape and appended.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample as ClientSample

from exporter.metrics import DATA_SPECS, MetricSpec
from exporter.store import SnapshotStore, StoreView

_OM_EOF = b"# EOF\n"


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
    ) -> None:
        self._view = view
        self._specs = tuple(specs)
        note = f" Polled from the provider every {format_interval(poll_interval)}."
        self._help = {s.name: s.help + note for s in self._specs}

    def collect(self, view: StoreView | None = None) -> Iterator[Metric]:
        view = view if view is not None else self._view()
        families = {
            spec.name: Metric(spec.family, self._help[spec.name], spec.kind) for spec in self._specs
        }
        for snapshot in view.snapshots.values():
            for job in snapshot.jobs.values():
                for part in job.parts.values():
                    for s in part.samples:
                        family = families.get(s.name)
                        if family is not None:
                            family.samples.append(
                                ClientSample(
                                    s.name, dict(zip(s.label_names, s.label_values)), s.value
                                )
                            )
        for family in families.values():
            if family.samples:
                yield family


class _ViewCollector:
    def __init__(self, collector: SnapshotCollector, view: StoreView) -> None:
        self._collector = collector
        self._view = view

    def collect(self) -> Iterator[Metric]:
        return self._collector.collect(self._view)


@dataclass(slots=True)
class _Rendered:
    version: int
    body: bytes
    # A gzip stream of `body`, flushed but not finished: copy it to append the self-metrics.
    gzip_prefix: bytes | None = None
    gzip_state: Any = None


@dataclass(frozen=True, slots=True)
class Payload:
    body: bytes
    content_type: str
    gzipped: bool


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
        self.renders = 0

    def render_view(self, view: StoreView, accept: str = "") -> tuple[bytes, str]:
        """Render a view synchronously (benchmarks, tests); no cache."""
        encoder, content_type = choose_encoder(accept)
        return encoder(_ViewCollector(self._collector, view)), content_type

    async def payload(self, accept: str, gzip: bool) -> Payload:
        encoder, content_type = choose_encoder(accept)
        rendered = await self._data_part(encoder, content_type, gzip)
        tail = encoder(self._self_registry)
        if not gzip:
            return Payload(rendered.body + tail, content_type, False)
        state = rendered.gzip_state.copy()
        body = (rendered.gzip_prefix or b"") + state.compress(tail) + state.flush()
        return Payload(body, content_type, True)

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
                cached = await asyncio.to_thread(self._render, encoder, view)
                self._cache[content_type] = cached
            if gzip and cached.gzip_state is None:
                await asyncio.to_thread(self._compress, cached)
            return cached

    def _render(self, encoder: Callable[[Any], bytes], view: StoreView) -> _Rendered:
        body = encoder(_ViewCollector(self._collector, view))
        self.renders += 1
        # OpenMetrics ends with one `# EOF`: the self-metrics part brings it.
        return _Rendered(view.version, body.removesuffix(_OM_EOF))

    def _compress(self, rendered: _Rendered) -> None:
        compressor = zlib.compressobj(self._gzip_level, zlib.DEFLATED, 31)
        prefix = compressor.compress(rendered.body) + compressor.flush(zlib.Z_SYNC_FLUSH)
        rendered.gzip_prefix, rendered.gzip_state = prefix, compressor


def accepts_gzip(accept_encoding: str) -> bool:
    for item in accept_encoding.split(","):
        token, _, params = item.strip().partition(";")
        if token.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip().removeprefix("q=")
        if not params or not quality or quality.strip() not in ("0", "0.0", "0.00", "0.000"):
            return True
    return False
