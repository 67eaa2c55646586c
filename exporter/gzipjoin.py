"""One gzip stream from pieces deflated on their own, so that a change re-compresses its piece.

Each piece is raw deflate ended by a sync flush: byte-aligned and not final, and it refers to
nothing before it, so pieces concatenate into a valid deflate stream in any order (as pigz
writes them). The stream's CRC-32 is the pieces' CRCs combined (zlib's `crc32_combine`, which
Python's zlib does not expose: zlib's own through ctypes; the Python ones below where it cannot
be loaded cost ~100 us a piece, as much as deflating 22 KB). One gzip member, not one per
piece: Go's and Python's readers take concatenated members, but aiohttp's client and older
curls stop after the first. At 100k series, pieces of ~22 KB compress to 12 % more than the
whole text at once (1.07 MiB instead of 0.95), and one changed piece costs ~0.1 ms instead of
~100 ms for all.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

# A gzip member's header: deflate, no name, no time, unknown OS.
HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_POLY = 0xEDB88320  # CRC-32's polynomial, reflected
_ONE = 1 << 31  # x^0, reflected


def _multmodp(a: int, b: int) -> int:
    """a(x) b(x) mod p(x), reflected: zlib's multmodp."""
    m = _ONE
    product = 0
    while True:
        if a & m:
            product ^= b
            if not a & (m - 1):
                return product
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _powers() -> tuple[int, ...]:
    # x^(2^k) mod p(x) for k < 32: x^1 is 1 << 30 reflected, each the square of the one before.
    table = [1 << 30]
    for _ in range(31):
        table.append(_multmodp(table[-1], table[-1]))
    return tuple(table)


_X2N = _powers()


def shift_of_slowly(length: int) -> int:
    """x^(8 length) mod p(x), in Python (~90 us): zlib's crc32_combine_gen."""
    product, k = _ONE, 3
    while length:
        if length & 1:
            product = _multmodp(_X2N[k & 31], product)
        length >>= 1
        k += 1
    return product


def _combine_op_slowly(crc: int, then_crc: int, then_shift: int) -> int:
    return _multmodp(then_shift, crc) ^ then_crc


def combine_slowly(crc: int, then_crc: int, then_length: int) -> int:
    """The CRC of A + B from A's CRC, B's CRC and B's length, in Python (~100 us)."""
    return _combine_op_slowly(crc, then_crc, shift_of_slowly(then_length))


def _libz(name: str, restype: type, *argtypes: type) -> Callable[..., int] | None:
    """zlib's function `name` (~1.5 us a call through ctypes): from Python's zlib module's own
    library (it links libz), else the system's libz; None if neither has it (the `_gen` and
    `_op` ones came in zlib 1.2.12). Called holding the GIL (`PyDLL`): a render thread that let
    it go for each sub-microsecond call would hand it to the loop and wait to get it back."""
    for find in (lambda: getattr(zlib, "__file__", None), lambda: ctypes.util.find_library("z")):
        library = find()
        try:
            function = getattr(ctypes.PyDLL(library), name) if library else None
        except (OSError, AttributeError):
            continue
        if function is not None:
            function.restype = restype
            function.argtypes = list(argtypes)
            return cast(Callable[..., int], function)
    return None


_ulong, _long = ctypes.c_ulong, ctypes.c_long
# x^(8 length) mod p(x): what a CRC is multiplied by to have `length` bytes follow it.
shift_of: Callable[[int], int] = _libz("crc32_combine_gen", _ulong, _long) or shift_of_slowly
# The CRC of A + B from A's CRC, B's CRC and B's `shift_of(len(B))`.
combine: Callable[[int, int, int], int] = (
    _libz("crc32_combine_op", _ulong, _ulong, _ulong, _ulong) or _combine_op_slowly
)
# The CRC of A + B from A's CRC, B's CRC and B's length.
crc_combine: Callable[[int, int, int], int] = (
    _libz("crc32_combine", _ulong, _ulong, _ulong, _long) or combine_slowly
)


@dataclass(frozen=True, slots=True)
class Deflated:
    """A piece of the stream: its raw deflate, and its text's length, CRC and CRC shift."""

    raw: bytes
    length: int
    crc: int
    shift: int


# What zlib keeps clear of its window's end: a match reaches back at most the window's size
# less this, so a window this much larger than the text finds every match the largest would.
_LOOKAHEAD = 262


def window_bits(length: int) -> int:
    """Raw deflate's window bits (negative) for `length` bytes of text: the smallest window that
    holds the text (9 to 15). zlib sets up and clears its window and hash tables for every
    stream, which for a few KB costs more than compressing them (~40 against ~20 us at 3 KB)."""
    return -min(15, max(9, (length + _LOOKAHEAD).bit_length()))


def raw_deflate(data: bytes, level: int) -> bytes:
    """`data` as raw deflate ended by a sync flush (a piece: see the module's docstring)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, window_bits(len(data)))
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


def inflate(raw: bytes, length: int) -> bytes:
    """The text of a piece of `length` bytes deflated by `raw_deflate`."""
    return zlib.decompressobj(window_bits(length)).decompress(raw)


def deflate(data: bytes, level: int) -> Deflated:
    raw = raw_deflate(data, level)
    return Deflated(raw, len(data), zlib.crc32(data), shift_of(len(data)))


def join(pieces: list[Deflated]) -> Deflated:
    """Pieces in order as one piece (their raw bytes joined)."""
    crc = length = 0
    for piece in pieces:
        crc = combine(crc, piece.crc, piece.shift)
        length += piece.length
    return Deflated(b"".join([p.raw for p in pieces]), length, crc, shift_of(length))


def finish(body: Deflated, tail: bytes, level: int) -> tuple[bytes, bytes]:
    """(what goes before the body's raw bytes, what goes after): with the body, a whole gzip
    member whose text is the body's text then `tail` (compressed here)."""
    compressor = zlib.compressobj(level, zlib.DEFLATED, window_bits(len(tail)))
    end = compressor.compress(tail) + compressor.flush()
    crc = zlib.crc32(tail, body.crc)
    return HEADER, end + struct.pack("<II", crc, (body.length + len(tail)) & 0xFFFFFFFF)
