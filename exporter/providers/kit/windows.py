"""Windows of a job's life, and info series over a span.

A window is `[start, end]`, both inclusive unix seconds, as both providers read them; the next
one starts a second after, so no point is read twice. Windows follow from the span's start:
the run's window is fixed in the resume state, so a resumed run cuts the same windows (and
keys). Aligned to multiples of their length instead, a day of 1000-minute windows took 3
calls per type, not 2.
"""

from __future__ import annotations

import math
from typing import Final

from exporter.model import Sample
from exporter.providers.kit.history import Series

# Info and status series are written every minute: Prometheus' 5-minute lookback sees them
# as continuous, and a week costs 10,080 samples a series.
INFO_STEP: Final = 60


def windows(start: float, end: float, length: int) -> list[tuple[int, int]]:
    """`[start, end]` cut into windows of `length` seconds from `start` on."""
    first, last = math.ceil(start), math.floor(end)
    if last < first or length < 1:
        return []
    return [(at, min(at + length - 1, last)) for at in range(first, last + 1, length)]


def grid(start: float, end: float, step: int = INFO_STEP) -> list[int]:
    """Multiples of `step` within `[start, end]`."""
    first = math.ceil(start / step) * step
    return list(range(first, math.floor(end) + 1, step))


def over(sample: Sample, start: float, end: float) -> Series:
    """`sample`'s value at every INFO_STEP of `[start, end]`."""
    points = [(float(t), sample.value) for t in grid(start, end)]
    return Series(sample.name, sample.label_names, sample.label_values, points)
