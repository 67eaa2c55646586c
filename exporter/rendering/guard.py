"""The one duplicate guard: a family never holds two samples with the same labels.

The first in view order wins, and the rest are counted per provider. Within a part the guard
runs as the part is rendered (`kept`). Between parts, two lines can only be equal if their parts
share a key: the family and the job_id label's value (the family and the whole label string
without one). `Owners` counts the live parts that hold each key; the parts holding a key another
part holds too (a contested key) are rendered again through the guard together, in view order,
at each change: rare (two targets on one resource pool, an upstream name that is itself a
cleaned form of another), and exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

from exporter.model import Sample
from exporter.rendering.lines import LineCache, lines

# (family, job_id value or "\0" + label string)
Key = tuple[str, str]


def kept(
    samples: Iterable[Sample],
    families: Mapping[str, object],
    seen: dict[str, set[str]],
    cache: LineCache,
    dropped: Counter[str],
) -> Iterator[tuple[Sample, str]]:
    """Each sample of a known family with its label string, unless the family already has (in
    `seen`) those labels; `dropped` counts those left out per family."""
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


def guarded(
    name: str,
    samples: Iterable[Sample],
    seen: dict[str, set[str]],
    cache: LineCache,
    dropped: Counter[str],
) -> bytes:
    """The lines of family `name` of `samples`, through the guard with `seen`."""
    return lines(name, kept(samples, {name: None}, seen, cache, dropped), cache)


class Owners:
    """How many live parts hold each key, and the keys more than one of them holds."""

    def __init__(self) -> None:
        self._count: Counter[Key] = Counter()
        self.contested: set[Key] = set()

    def add(self, keys: Iterable[Key], step: int) -> None:
        """Count a part's keys in (`step` above 0) or out (below), `abs(step)` times."""
        count, contested = self._count, self.contested
        for key in keys:
            count[key] += step
            held = count[key]
            if held > 1:
                contested.add(key)
            else:
                contested.discard(key)
                if not held:
                    del count[key]

    def of(self, family: str) -> set[Key]:
        """The contested keys of `family`."""
        return {key for key in self.contested if key[0] == family}
