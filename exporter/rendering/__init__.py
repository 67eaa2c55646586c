"""Sample lines kept per part and per family, and a store view composed from them.

As kube-state-metrics keeps each object's rendered bytes per family, `Renderer` keeps each
part's sample lines: `merge` and `share_labels` keep a part that was not read again as the very
same object, samples tuple included, so the tuple's identity keys the cache. A store change
renders the parts it brought, then each family's lines are the parts' lines in view order
(targets, jobs, parts), cut into chunks at content-defined boundaries (a part's place, hashed),
so a changed part changes its chunk only. A chunk keeps its text and its deflate
(`exporter.gzipjoin`); a family keeps its chunks joined. A rendering (`Rendering`, immutable)
is each family's HELP/TYPE lines and chunks, for identity, and the same deflated, for gzip.

At 100k series a change of 4 jobs took 60-100 ms (both formats, gzip included) on the shared
2-core machine where rendering the whole store took 0.8-2 s (bench/churn.py drives it).

The one duplicate guard is `kept`: a family never holds two samples with the same labels, the
first in view order wins, and the rest are counted per provider. Within a part it runs as the
part is rendered. Between parts, two lines can only be equal if their parts share a key: the
family and the job_id label's value (the family and the whole label string without one).
Parts whose keys another part holds too are rendered again through the guard, in view order,
at each change: rare (two targets on one resource pool, an upstream name that is itself a
cleaned form of another), and exact.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from exporter import gzipjoin
from exporter.gzipjoin import Deflated
from exporter.metrics import MetricSpec
from exporter.model import Sample
from exporter.store import StoreView

Encoder = Callable[[Any], bytes]
# Units per chunk on average, and at most: ~22 KB of text per chunk at 100k series, which
# compresses to 12 % more than the whole text at once (4 per chunk: 24 %; 1: 94 %), in 0.1 ms.
CHUNK = 8
MAX_CHUNK = 64
# Label-name tuples checked per format: providers' mappings make a few dozen.
_MAX_NAMES = 1024
# Every character the formats escape, and some they must not.
_PROBE_VALUE = 'say "hi"\\ C:\\dir\\n\nline two ü ✓ \u2028 {},='
_PROBE_NUMBER = 0.125
_format_value: Callable[[float], str] = floatToGoString


def escape_label_value(value: str) -> str:
    # prometheus-client's escaping of label values, the same in text 0.0.4 and OpenMetrics.
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def label_string(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`{a="1",b="2"}` as prometheus-client writes `dict(zip(names, values))`: sorted by name."""
    pairs = sorted(dict(zip(names, values)).items())
    if not pairs:
        return ""
    return "{" + ",".join([f'{k}="{escape_label_value(v)}"' for k, v in pairs]) + "}"


@dataclass(slots=True)
class LineCache:
    """Label strings and formatted values, shared by the parts rendered in one change."""

    labels: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = field(default_factory=dict)
    values: dict[float, str] = field(default_factory=dict)
    job_index: dict[tuple[str, ...], int] = field(default_factory=dict)

    def label(self, names: tuple[str, ...], values: tuple[str, ...]) -> str:
        key = (names, values)
        text = self.labels.get(key)
        if text is None:
            text = self.labels[key] = label_string(names, values)
        return text

    def value(self, number: float) -> str:
        text = self.values.get(number)
        if text is None:
            text = _format_value(number)
            # Not 0: 0.0 == -0.0 but they print differently.
            if number:
                self.values[number] = text
        return text

    def key(self, name: str, names: tuple[str, ...], values: tuple[str, ...], label: str) -> str:
        """The part key of a sample: its job_id value (as the label dict holds it), or its
        whole label string when it has none (\\0 keeps the two apart)."""
        index = self.job_index.get(names)
        if index is None:
            index = len(names) - 1 - names[::-1].index("job_id") if "job_id" in names else -1
            self.job_index[names] = index
        if 0 <= index < len(values):
            return values[index]
        return "\0" + label


def kept(
    samples: Iterable[Sample],
    families: Mapping[str, object],
    seen: dict[str, set[str]],
    cache: LineCache,
    dropped: Counter[str],
) -> Iterator[tuple[Sample, str]]:
    """The duplicate guard: each sample of a known family with its label string, unless the
    family already has (in `seen`) those labels; `dropped` counts those left out per family."""
    for sample in samples:
        name, names, values, _ = sample
        if name not in families:
            continue
        label = cache.label(names, values)
        used = seen.get(name)
        if used is None:
            used = seen[name] = set()
        elif label in used:
            dropped[name] += 1
            continue
        used.add(label)
        yield sample, label


def _lines(
    name: str,
    samples: tuple[Sample, ...],
    seen: dict[str, set[str]],
    cache: LineCache,
    dropped: Counter[str],
) -> bytes:
    """A part's lines of one family, through the guard with `seen`."""
    kept_here = kept(samples, {name: None}, seen, cache, dropped)
    return b"".join([f"{name}{label} {cache.value(s.value)}\n".encode() for s, label in kept_here])


@dataclass(frozen=True, slots=True)
class RenderedPart:
    """One part's samples (kept alive: their identity is the cache key) and what the
    composition needs of them; its lines live in the chunks."""

    samples: tuple[Sample, ...]
    families: frozenset[str]
    keys: frozenset[tuple[str, str]]
    label_names: frozenset[tuple[str, ...]]
    # Samples the guard left out within the part, per family.
    duplicates: Mapping[str, int]
    # Content-defined chunk boundary: a chunk ends after a unit whose mark % CHUNK is 0. The
    # hash of its place (target, job, part): the same for the part's next reads, in this
    # process (any string: a job id is not encoded).
    mark: int


def render_unit(
    samples: tuple[Sample, ...],
    families: Mapping[str, object],
    place: tuple[str, str, str],
    cache: LineCache,
) -> tuple[RenderedPart, dict[str, bytes]]:
    """A part's unit and its lines per family."""
    lines: dict[str, list[bytes]] = {}
    keys: set[tuple[str, str]] = set()
    label_names: set[tuple[str, ...]] = set()
    seen: dict[str, set[str]] = {}
    duplicates: Counter[str] = Counter()
    for (name, names, values, number), label in kept(samples, families, seen, cache, duplicates):
        keys.add((name, cache.key(name, names, values, label)))
        label_names.add(names)
        lines.setdefault(name, []).append(f"{name}{label} {cache.value(number)}\n".encode())
    blocks = {name: b"".join(family) for name, family in lines.items()}
    unit = RenderedPart(
        samples,
        frozenset(blocks),
        frozenset(keys),
        frozenset(label_names),
        dict(duplicates),
        hash(place),
    )
    return unit, blocks


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive units' lines of one family: text, deflate, and where each unit's are."""

    units: tuple[RenderedPart, ...]
    data: bytes
    raw: bytes
    ends: tuple[int, ...]
    # Units whose lines here went through the guard with other parts' (some may be missing).
    exact: tuple[bool, ...]
    # Samples the guard left out of these lines, per provider.
    duplicates: tuple[tuple[str, int], ...]

    def lines_of(self, index: int) -> memoryview:
        start = self.ends[index - 1] if index else 0
        return memoryview(self.data)[start : self.ends[index]]


@dataclass(frozen=True, slots=True)
class FamilyRun:
    """A family's chunks in order, and all of them as one deflate piece."""

    chunks: tuple[Chunk, ...]
    deflated: Deflated
    # Its units' identities, whether none went through the guard with other parts', and
    # the samples the guard left out per provider.
    ids: tuple[int, ...]
    plain: bool
    duplicates: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Rendering:
    """A store version in one format, never changed: the exposition without its trailer
    (the self-metrics part brings `# EOF`), as text parts and as one deflate piece."""

    version: int
    content_type: str
    parts: tuple[bytes, ...]
    deflated: Deflated
    gzip_level: int


class FormatCheck:
    """For one format (encoder and content type): each family's HELP/TYPE lines as the
    encoder writes them, and whether the encoder writes a family's and a label-name tuple's
    sample lines as `render_unit` does (a probe of every character the formats escape)."""

    def __init__(self, encoder: Encoder, content_type: str, help_of: Mapping[str, str]) -> None:
        self.encoder = encoder
        self.content_type = content_type
        self._help = help_of
        self.trailer = encoder(Families()).decode()
        self._headers: dict[str, bytes | None] = {}
        self._names: dict[tuple[str, ...], bool] = {}

    def header(self, spec: MetricSpec) -> bytes | None:
        """The family's HELP/TYPE lines; None if the encoder would write its lines otherwise."""
        if spec.name not in self._headers:
            help_text = self._help[spec.name]
            empty = Metric(spec.family, help_text, spec.kind)
            header = self.encoder(Families(empty)).decode().removesuffix(self.trailer)
            probe = Metric(spec.family, help_text, spec.kind)
            probe.add_sample(spec.name, {"probe": _PROBE_VALUE}, _PROBE_NUMBER)
            label = label_string(("probe",), (_PROBE_VALUE,))
            line = f"{spec.name}{label} {_format_value(_PROBE_NUMBER)}\n"
            alike = self.encoder(Families(probe)).decode() == header + line + self.trailer
            self._headers[spec.name] = header.encode() if alike else None
        return self._headers[spec.name]

    def names_alike(self, names: tuple[str, ...]) -> bool:
        if names not in self._names:
            if len(self._names) >= _MAX_NAMES:
                self._names.clear()
            values = tuple(f"{_PROBE_VALUE}{i}" for i in range(len(names)))
            probe = Metric("probe", "Probe.", "gauge")
            probe.add_sample("probe", dict(zip(names, values)), _PROBE_NUMBER)
            empty = self.encoder(Families(Metric("probe", "Probe.", "gauge"))).decode()
            line = f"probe{label_string(names, values)} {_format_value(_PROBE_NUMBER)}\n"
            expected = empty.removesuffix(self.trailer) + line + self.trailer
            self._names[names] = self.encoder(Families(probe)).decode() == expected
        return self._names[names]


class Families:
    """A collector of given families, to ask an encoder how it writes them."""

    def __init__(self, *families: Metric) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class Renderer:
    """Renderings of successive store views, each costing what changed since the one before.

    Not thread-safe: one render at a time (`exporter.collector.Exposition` runs them in turn).
    """

    def __init__(
        self,
        specs: tuple[MetricSpec, ...],
        checks: Iterable[FormatCheck],
        fallback: Callable[[StoreView, Encoder], bytes],
        on_duplicates: Callable[[Mapping[str, int]], None] | None = None,
        gzip_level: int = 6,
    ) -> None:
        self._specs = specs
        self._families = {s.name: s for s in specs}
        self._checks = tuple(checks)
        self._fallback = fallback
        self._on_duplicates = on_duplicates
        self._gzip_level = gzip_level
        self._units: dict[int, RenderedPart] = {}
        self._chunks: dict[tuple[str, tuple[int, ...]], Chunk] = {}
        self._runs: dict[str, FamilyRun] = {}
        # Per family, each live unit's lines in the chunk that holds them all.
        self._where: dict[str, dict[int, memoryview]] = {}
        # Keys held by more than one live unit, and how many hold each key.
        self._owners: Counter[tuple[str, str]] = Counter()
        self._contested: set[tuple[str, str]] = set()
        self._header_pieces: dict[tuple[int, str], Deflated] = {}
        # Per format, live units with a label-name tuple it writes otherwise.
        self._odd: list[int] = [0] * len(self._checks)
        self.fallbacks = 0

    def render(self, view: StoreView) -> tuple[Rendering, ...]:
        """One rendering per format check, in their order."""
        cache = LineCache()
        fresh: dict[int, dict[str, bytes]] = {}
        live: dict[int, RenderedPart] = {}
        repeated: set[int] = set()
        order: dict[str, tuple[list[RenderedPart], list[str]]] = {
            n: ([], []) for n in self._families
        }
        for snapshot in view.snapshots.values():
            provider = snapshot.provider
            for job_id, job in snapshot.jobs.items():
                for part_name, part in job.parts.items():
                    samples = part.samples
                    if not samples:
                        continue
                    key = id(samples)
                    unit = live.get(key)
                    if unit is not None:
                        repeated.add(id(unit))
                    else:
                        unit = self._units.get(key)
                        if unit is None:
                            place = (snapshot.target, job_id, part_name)
                            unit, blocks = render_unit(samples, self._families, place, cache)
                            fresh[id(unit)] = blocks
                        live[key] = unit
                    for name in unit.families:
                        units, providers = order[name]
                        units.append(unit)
                        providers.append(provider)
        self._track(live)
        duplicates: Counter[str] = Counter()
        runs: dict[str, FamilyRun] = {}
        chunks: dict[tuple[str, tuple[int, ...]], Chunk] = {}
        for name, (units, providers) in order.items():
            if units:
                run = self._run(name, units, providers, fresh, repeated, chunks, cache)
                duplicates.update(run.duplicates)
                runs[name] = run
                # The family's previous chunks go now, not after every family is done: a full
                # change would otherwise hold two generations of lines (+20 MB at 100k).
                old = self._runs.get(name)
                if old is not None and old is not run:
                    for chunk in old.chunks:
                        self._chunks.pop((name, tuple(map(id, chunk.units))), None)
                    self._runs[name] = run
        self._chunks, self._runs = chunks, runs
        if self._on_duplicates is not None:
            self._on_duplicates(dict(duplicates))
        return tuple(self._compose(view, i, check, runs) for i, check in enumerate(self._checks))

    def _track(self, live: dict[int, RenderedPart]) -> None:
        """Key owners, odd label names and where lines are, from the units that came and went."""
        before = self._units
        for key, unit in live.items():
            if key not in before:
                self._count(unit, 1)
        for key, unit in before.items():
            if key not in live:
                self._count(unit, -1)
                for name in unit.families:
                    self._where.get(name, {}).pop(id(unit), None)
        self._units = live

    def _count(self, unit: RenderedPart, step: int) -> None:
        owners, contested = self._owners, self._contested
        for key in unit.keys:
            owners[key] += step
            held = owners[key]
            if held > 1:
                contested.add(key)
            else:
                contested.discard(key)
                if not held:
                    del owners[key]
        for i, check in enumerate(self._checks):
            if not all(check.names_alike(n) for n in unit.label_names):
                self._odd[i] += step

    def _run(
        self,
        name: str,
        units: list[RenderedPart],
        providers: list[str],
        fresh: dict[int, dict[str, bytes]],
        repeated: set[int],
        chunks: dict[tuple[str, tuple[int, ...]], Chunk],
        cache: LineCache,
    ) -> FamilyRun:
        """The family's chunks: the previous ones where their units are the same."""
        ids = tuple(map(id, units))
        contested = {k for k in self._contested if k[0] == name}
        plain = not contested and repeated.isdisjoint(ids)
        old = self._runs.get(name)
        if plain and old is not None and old.plain and old.ids == ids:
            for kept_chunk in old.chunks:
                chunks[(name, tuple(map(id, kept_chunk.units)))] = kept_chunk
            return old
        where = self._where.setdefault(name, {})
        seen: dict[str, set[str]] = {}
        duplicates: Counter[str] = Counter()
        made: list[Chunk] = []
        start = 0
        for end, unit in enumerate(units, start=1):
            if unit.mark % CHUNK and end - start < MAX_CHUNK and end < len(units):
                continue
            key = ids[start:end]
            batch = units[start:end]
            exact = [
                not plain and (id(u) in repeated or not contested.isdisjoint(u.keys)) for u in batch
            ]
            clash = not plain and any(exact)
            chunk = None if clash else self._chunks.get((name, key))
            if chunk is None:
                chunk = self._rechunk(name, batch, providers[start:end], exact, fresh, seen, cache)
                for index, u in enumerate(batch):
                    if exact[index]:
                        where.pop(id(u), None)
                    else:
                        where[id(u)] = chunk.lines_of(index)
            if not clash:
                chunks[(name, key)] = chunk
            for provider, count in chunk.duplicates:
                duplicates[provider] += count
            made.append(chunk)
            start = end
        return FamilyRun(tuple(made), self._join(made), ids, plain, dict(duplicates))

    def _rechunk(
        self,
        name: str,
        batch: list[RenderedPart],
        providers: list[str],
        exact: list[bool],
        fresh: dict[int, dict[str, bytes]],
        seen: dict[str, set[str]],
        cache: LineCache,
    ) -> Chunk:
        """A chunk of the family's lines of `batch`: each unit's from its rendering if fresh,
        from the chunk that held them, or through the guard with `seen` if `exact`."""
        where = self._where[name]
        blocks: list[bytes | memoryview] = []
        duplicates: Counter[str] = Counter()
        for unit, provider, again in zip(batch, providers, exact, strict=True):
            if again:
                dropped: Counter[str] = Counter()
                blocks.append(_lines(name, unit.samples, seen, cache, dropped))
                duplicates[provider] += dropped[name]
                continue
            duplicates[provider] += unit.duplicates.get(name, 0)
            new = fresh.get(id(unit))
            # A fresh unit's lines are used once (a repeated one goes through the guard).
            block = new.pop(name) if new is not None else where.get(id(unit))
            # None: its lines were cut by the guard last time.
            if block is None:
                block = _lines(name, unit.samples, {}, cache, Counter())
            blocks.append(block)
        counts = tuple((p, n) for p, n in duplicates.items() if n)
        return self._chunk(tuple(batch), blocks, exact, counts)

    def _chunk(
        self,
        units: tuple[RenderedPart, ...],
        blocks: list[bytes | memoryview],
        exact: list[bool],
        duplicates: tuple[tuple[str, int], ...],
    ) -> Chunk:
        ends: list[int] = []
        end = 0
        for block in blocks:
            end += len(block)
            ends.append(end)
        data = b"".join(blocks)
        compressor = zlib.compressobj(self._gzip_level, zlib.DEFLATED, -15)
        raw = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
        return Chunk(units, data, raw, tuple(ends), tuple(exact), duplicates)

    def _join(self, chunks: list[Chunk]) -> Deflated:
        crc = length = 0
        for chunk in chunks:
            crc = zlib.crc32(chunk.data, crc)
            length += len(chunk.data)
        raw = b"".join([c.raw for c in chunks])
        return Deflated(raw, length, crc, gzipjoin.shift_of(length))

    def _compose(
        self, view: StoreView, index: int, check: FormatCheck, runs: dict[str, FamilyRun]
    ) -> Rendering:
        headers = [(check.header(self._families[name]), run) for name, run in runs.items()]
        if self._odd[index] or any(header is None for header, _ in headers):
            self.fallbacks += 1
            body = self._fallback(view, check.encoder).removesuffix(check.trailer.encode())
            deflated = gzipjoin.deflate(body, self._gzip_level)
            return Rendering(view.version, check.content_type, (body,), deflated, self._gzip_level)
        parts: list[bytes] = []
        pieces: list[Deflated] = []
        for header, run in headers:
            assert header is not None
            parts.append(header)
            parts += [chunk.data for chunk in run.chunks]
            pieces += (self._header_piece(index, header), run.deflated)
        return Rendering(
            view.version, check.content_type, tuple(parts), gzipjoin.join(pieces), self._gzip_level
        )

    def _header_piece(self, index: int, header: bytes) -> Deflated:
        key = (index, header.decode())
        piece = self._header_pieces.get(key)
        if piece is None:
            piece = self._header_pieces[key] = gzipjoin.deflate(header, self._gzip_level)
        return piece
