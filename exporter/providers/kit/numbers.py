"""One rule set for upstream numbers, and one set of reasons for the values it drops.

Upstream sends numbers as strings (the documented form), JSON numbers, or garbage. A value
is a finite float written in ASCII; `1_000` is refused although Python's float() takes it
(AIHC refused it while Alaya exported 1000). Each dropped value is counted in
`training_exporter_dropped_values_total{reason}` by the caller's `drop(reason)`, and only
that value is lost.

0-1 metrics (`UNIT_INTERVAL`: every `_ratio` family, and `training_pod_rdma_healthy`, whose
1 is healthy and 0 not; a value between is kept, as upstream may average over a time step)
outside [0, 1] are dropped as `out_of_range` (Alaya exported ratios of -1 and 12345).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Final

from exporter.metrics import SPECS

Drop = Callable[[str], None]

# Not a number at all (or null where a number belongs).
UNPARSABLE: Final = "unparsable"
# NaN, an infinity, or a number too large for a float.
NOT_FINITE: Final = "not_finite"
# A number its metric cannot take: a 0-1 metric outside [0, 1], a negative count or duration.
OUT_OF_RANGE: Final = "out_of_range"
# A time that does not parse, or is not after 1970.
BAD_TIMESTAMP: Final = "bad_timestamp"
# A point (sample) of a series that is not an object.
INVALID_SAMPLE: Final = "invalid_sample"
# An element of a reply's series list that is not an object.
INVALID_SERIES: Final = "invalid_series"
# An element of a reply's list (a job, a pod, an event) that does not fit its shape.
INVALID_ITEM: Final = "invalid_item"
# A second element of one reply for a series already seen in it (the first is kept).
DUPLICATE_SERIES: Final = "duplicate_series"

DROP_REASONS: Final = (
    UNPARSABLE,
    NOT_FINITE,
    OUT_OF_RANGE,
    BAD_TIMESTAMP,
    INVALID_SAMPLE,
    INVALID_SERIES,
    INVALID_ITEM,
    DUPLICATE_SERIES,
)

UNIT_INTERVAL: Final = frozenset(
    {s.name for s in SPECS if s.name.endswith("_ratio")} | {"training_pod_rdma_healthy"}
)


def parse_number(raw: object) -> tuple[float | None, str | None]:
    """(value, None) for a finite number; (None, reason) for anything else."""
    if type(raw) is str:
        try:
            value = float(raw)
        except ValueError:
            return None, UNPARSABLE
        # float() also takes `1_000` and non-ASCII digits; upstream's decimals have neither.
        if "_" in raw or not raw.isascii():
            return None, UNPARSABLE
    elif isinstance(raw, int | float) and not isinstance(raw, bool):
        try:
            value = float(raw)
        except OverflowError:
            # A JSON integer too large for a float.
            return None, NOT_FINITE
    else:
        return None, UNPARSABLE
    if not math.isfinite(value):
        return None, NOT_FINITE
    return value, None


def number(raw: object, drop: Drop) -> float | None:
    """The value, or None with its reason counted."""
    value, reason = parse_number(raw)
    if reason is not None:
        drop(reason)
    return value


def timestamp(raw: object, drop: Drop) -> float | None:
    """Unix seconds after 1970, or None counted as `bad_timestamp`."""
    value, _ = parse_number(raw)
    if value is None or value <= 0:
        drop(BAD_TIMESTAMP)
        return None
    return value


def in_range(name: str, value: float | None, drop: Drop) -> float | None:
    """`value` if the family `name` can take it; None counted as `out_of_range` if not."""
    if value is not None and name in UNIT_INTERVAL and not 0.0 <= value <= 1.0:
        drop(OUT_OF_RANGE)
        return None
    return value


def non_negative(value: float | None, drop: Drop) -> float | None:
    """`value` unless it is below 0 (a count, a duration): None counted as `out_of_range`."""
    if value is not None and value < 0:
        drop(OUT_OF_RANGE)
        return None
    return value


def scaled(value: float, divisor: int) -> float:
    """`value / divisor` through the decimal text, so "82.772012" / 100 is 0.82772012, not
    0.8277201200000001. A power of ten moves the exponent of the text (both round the same
    exact decimal once), which is cheaper than dividing a `Decimal`: every usage point goes
    through here."""
    text = repr(value)
    places = _POWERS.get(divisor)
    if places is not None and "e" not in text and math.isfinite(value):
        return float(f"{text}e-{places}")
    return float(Decimal(text) / divisor)


_POWERS: Final = {10**k: k for k in range(1, 19)}
