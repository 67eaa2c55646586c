"""The per-part cache: each part's rendering kept while its samples are the same objects.

As kube-state-metrics keeps each object's rendered lines per family, `PartCache` keeps a
`RenderedPart` per part: `merge` and `share_labels` keep a part that was not read again as the
very same object, `Samples` included, so its identity keys the cache. A part whose values alone
changed comes with its previous read's `Shape`: its lines are its previous lines' label parts
with the new values (`rewrite`), not rendered again from its labels. A walk of a store view
(`exporter.rendering.walk`) takes the parts of the jobs that changed from the cache, releases
those of the jobs they replaced, and settles: what it rendered came, what sits nowhere went.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from exporter.model import Sample, Samples
from exporter.rendering.guard import Key, kept
from exporter.rendering.lines import LineCache, heads, with_values

# Where a part sits: target, job, part.
Place = tuple[str, str, str]
# The lines a live part has in a family now, or None (cut by the guard).
LinesOf = Callable[[str, "RenderedPart"], bytes | memoryview | None]
_NONE: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PartInfo:
    """What the chunker and the guard need of a part's samples, the same for every read of one
    shape: its families, keys and label-name tuples, and the samples the guard left out within
    it, per family."""

    families: frozenset[str]
    keys: tuple[Key, ...]
    label_names: frozenset[tuple[str, ...]]
    duplicates: Mapping[str, int]


@dataclass(frozen=True, slots=True, eq=False)
class RenderedPart:
    """One part's samples (kept alive: their identity is the cache key) and what the
    composition needs of them; its lines live in the chunks."""

    samples: Sequence[Sample]
    info: PartInfo
    # Content-defined chunk boundary: a chunk ends after a part whose mark % CHUNK is 0. The
    # hash of its place: the same for the part's next reads, in this process (any string: a
    # job id is not encoded).
    mark: int


def render_part(
    samples: Sequence[Sample],
    families: Mapping[str, object],
    place: Place,
    cache: LineCache,
    sets: dict[frozenset[Any], frozenset[Any]],
) -> tuple[RenderedPart, dict[str, bytes]]:
    """A part rendered from its labels, and its lines per family; `sets` holds one of each
    equal family set and label-name set (most parts have one of a few)."""
    lines: dict[str, list[bytes]] = {}
    keys: set[Key] = set()
    label_names: set[tuple[str, ...]] = set()
    duplicates: Counter[str] = Counter()
    for (name, names, values, number), label in kept(samples, families, {}, cache, duplicates):
        keys.add((name, cache.key(names, values, label)))
        label_names.add(names)
        lines.setdefault(name, []).append(f"{name}{label} {cache.value(number)}\n".encode())
    blocks = {name: b"".join(family) for name, family in lines.items()}
    named, labelled = frozenset(blocks), frozenset(label_names)
    info = PartInfo(
        sets.setdefault(named, named),
        tuple(keys),
        sets.setdefault(labelled, labelled),
        MappingProxyType(dict(duplicates)) if duplicates else _NONE,
    )
    return RenderedPart(samples, info, hash(place)), blocks


def rewrite(
    old: Mapping[str, bytes | memoryview], samples: Samples, cache: LineCache
) -> dict[str, bytes] | None:
    """The lines of `samples` from `old`, the lines per family of a part of the same shape that
    the guard cut nothing from: the same lines but their values. None if they do not match."""
    shape, values = samples.shape, samples.values
    blocks = {}
    for name, text in old.items():
        numbers = shape.values_of(name, values)
        starts = heads(text)
        if len(starts) != len(numbers):
            return None
        blocks[name] = with_values(starts, numbers, cache)
    return blocks


@dataclass(slots=True)
class Walk:
    """One store view's parts: per family its parts and their providers, in view order."""

    order: dict[str, tuple[list[RenderedPart], list[str]]]
    cache: LineCache = field(default_factory=LineCache)
    # The lines of the parts rendered in this walk, per family (by the part's identity).
    fresh: dict[int, dict[str, bytes]] = field(default_factory=dict)
    # Parts that sit in more than one place of the view (one samples object twice).
    repeated: set[int] = field(default_factory=set)
    # Parts the walk before did not have, and those it had that this one has not.
    came: list[RenderedPart] = field(default_factory=list)
    gone: list[RenderedPart] = field(default_factory=list)
    # The samples whose places changed in this walk.
    moved: set[int] = field(default_factory=set)


class PartCache:
    """The live parts, by their samples' identity (with the places each sits in) and by their
    shape's; a part goes when it sits in no place."""

    def __init__(self, families: Mapping[str, object]) -> None:
        self._families = families
        self._parts: dict[int, RenderedPart] = {}
        self._places: Counter[int] = Counter()
        self._repeated: set[int] = set()
        self._by_shape: dict[int, RenderedPart] = {}
        self._sets: dict[frozenset[Any], frozenset[Any]] = {}

    def take(
        self, samples: Sequence[Sample], place: Place, walk: Walk, lines_of: LinesOf
    ) -> RenderedPart:
        """The part of `samples`, now sitting in `place` too: rendered if it is new."""
        key = id(samples)
        part = self._parts.get(key)
        if part is None:
            part, blocks = self._render(samples, place, walk.cache, lines_of)
            self._parts[key] = part
            walk.fresh[id(part)] = blocks
            walk.came.append(part)
        self._places[key] += 1
        walk.moved.add(key)
        return part

    def release(self, part: RenderedPart, walk: Walk) -> None:
        """`part` sits in one place fewer."""
        key = id(part.samples)
        self._places[key] -= 1
        walk.moved.add(key)

    def settle(self, walk: Walk) -> None:
        """After a walk: the parts in no place go, and those in more than one are repeated."""
        places, by_shape = self._places, self._by_shape
        for key in walk.moved:
            held = places[key]
            part = self._parts[key]
            if not held:
                del places[key], self._parts[key]
                walk.gone.append(part)
            if held > 1:
                self._repeated.add(id(part))
            else:
                self._repeated.discard(id(part))
        walk.repeated = self._repeated
        for part in walk.gone:
            samples = part.samples
            if isinstance(samples, Samples) and by_shape.get(id(samples.shape)) is part:
                del by_shape[id(samples.shape)]
        for part in walk.came:
            if isinstance(part.samples, Samples) and id(part.samples) in self._parts:
                by_shape[id(part.samples.shape)] = part

    def _render(
        self, samples: Sequence[Sample], place: Place, cache: LineCache, lines_of: LinesOf
    ) -> tuple[RenderedPart, dict[str, bytes]]:
        """A part's lines from those of the part of its shape, where there is one to take
        them from, else from its labels."""
        old = self._by_shape.get(id(samples.shape)) if isinstance(samples, Samples) else None
        if old is not None and not old.info.duplicates:
            found = {name: lines_of(name, old) for name in old.info.families}
            texts = {name: text for name, text in found.items() if text is not None}
            if len(texts) == len(found):
                assert isinstance(samples, Samples)
                blocks = rewrite(texts, samples, cache)
                if blocks is not None:
                    return RenderedPart(samples, old.info, hash(place)), blocks
        return render_part(samples, self._families, place, cache, self._sets)
