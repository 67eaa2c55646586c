"""Prometheus remote write 1.0's body: a protobuf `WriteRequest`, snappy's block format.

Only the four messages the protocol needs to carry samples are written, by hand
(`prompb/types.proto`, `prompb/remote.proto`):

    WriteRequest { repeated TimeSeries timeseries = 1; }
    TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
    Label        { string name = 1; string value = 2; }
    Sample       { double value = 1; int64 timestamp = 2; }   // milliseconds

Why by hand: the encoding is a tag byte, a varint length and the bytes, about forty lines with
no generated code to keep in step with a protobuf runtime (generated `_pb2` modules pin the
runtime's major version), and the backfill only ever writes these four messages. The tests
parse what this writes with Google's own protobuf runtime, from a descriptor built at run time,
and the two real stores decode it end to end. Snappy is cramjam's (Rust wheels; python-snappy
is built on it): the protocol wants the block format (`compress_raw`), not the framed one.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Sequence
from typing import Final

import cramjam

# Field 1 or 2, wire type 2 (length-delimited): the tag bytes of every repeated message here.
_FIELD1: Final = b"\x0a"
_FIELD2: Final = b"\x12"
# Sample: field 1 fixed64 (a double), field 2 varint.
_VALUE: Final = struct.Struct("<Bd")
_VALUE_TAG: Final = 0x09
_TIMESTAMP_TAG: Final = b"\x10"
_INT64: Final = 1 << 64
# A slice's batches hold each series once; the next slice holds the same series again.
LABEL_CACHE: Final = 65536

HEADERS: Final = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}

# One series: (label name, value) pairs, sorted by name, `__name__` among them; and its
# samples as (unix seconds, value), in time order.
Labels = Sequence[tuple[str, str]]
Points = Sequence[Sequence[float]]


def varint(number: int) -> bytes:
    """Base-128 varint; a negative int64 as its two's complement (ten bytes)."""
    if 0 <= number < 0x80:
        return _SMALL[number]
    if number < 0:
        number += _INT64
    out = bytearray()
    while number > 0x7F:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


_SMALL: Final = [bytes((n,)) for n in range(0x80)]
# A Sample whose timestamp takes six varint bytes (1971 to 2109 in milliseconds), the
# backfill's every sample, in one pack: field 2, its length 16, the value, the timestamp.
_SAMPLE6: Final = struct.Struct("<BBBdB6B")
_SIX_BYTES: Final = range(1 << 35, 1 << 42)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def label(name: str, value: str) -> bytes:
    return _field(_FIELD1, _field(_FIELD1, name.encode()) + _field(_FIELD2, value.encode()))


def sample(at: float, value: float) -> bytes:
    """A Sample at `at` unix seconds (milliseconds on the wire, rounded)."""
    ms = round(at * 1000)
    if ms in _SIX_BYTES:
        return _SAMPLE6.pack(
            0x12,
            16,
            _VALUE_TAG,
            value,
            0x10,
            ms & 0x7F | 0x80,
            ms >> 7 & 0x7F | 0x80,
            ms >> 14 & 0x7F | 0x80,
            ms >> 21 & 0x7F | 0x80,
            ms >> 28 & 0x7F | 0x80,
            ms >> 35,
        )
    body = _VALUE.pack(_VALUE_TAG, value) + _TIMESTAMP_TAG + varint(ms)
    return _field(_FIELD2, body)


@functools.lru_cache(maxsize=LABEL_CACHE)
def labels(pairs: tuple[tuple[str, str], ...]) -> bytes:
    """A series' Label fields, encoded once for all its batches while it is among the
    `LABEL_CACHE` series used last."""
    return b"".join(label(n, v) for n, v in pairs)


def timeseries(pairs: Labels, points: Points) -> bytes:
    """One TimeSeries: its labels as given (the caller sorts them), its samples in order."""
    return labels(tuple(pairs)) + b"".join(sample(p[0], p[1]) for p in points)


def write_request(series: Iterable[tuple[Labels, Points]]) -> bytes:
    """The uncompressed WriteRequest of `series`."""
    return b"".join(_field(_FIELD1, timeseries(pairs, points)) for pairs, points in series)


def compress(body: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(body))


def decompress(body: bytes) -> bytes:
    return bytes(cramjam.snappy.decompress_raw(body))
