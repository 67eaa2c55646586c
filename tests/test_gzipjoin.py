"""Pieces deflated on their own make one gzip member that every reader takes whole."""

from __future__ import annotations

import gzip
import random
import zlib

from hypothesis import given
from hypothesis import strategies as st

from exporter import gzipjoin

pieces = st.lists(st.binary(max_size=3000) | st.text(max_size=800).map(str.encode), max_size=8)


@given(first=st.binary(max_size=2000), then=st.binary(max_size=70_000))
def test_combined_crc_is_the_crc_of_both(first: bytes, then: bytes) -> None:
    combined = gzipjoin.combine(zlib.crc32(first), zlib.crc32(then), gzipjoin.shift_of(len(then)))
    assert combined == zlib.crc32(first + then)
    assert gzipjoin.shift_of_slowly(len(then)) == gzipjoin.shift_of(len(then))
    # zlib's own combine (as loaded here) and the Python one agree, from lengths alone.
    for combine in (gzipjoin.crc_combine, gzipjoin.combine_slowly):
        assert combine(zlib.crc32(first), zlib.crc32(then), len(then)) == combined


def test_zlibs_own_combine_is_used_here() -> None:
    # The Python fallbacks cost ~100 us a piece, as much as deflating one; zlib's, ~1.5 us.
    assert gzipjoin.shift_of is not gzipjoin.shift_of_slowly
    assert gzipjoin.crc_combine is not gzipjoin.combine_slowly


@given(parts=pieces, tail=st.binary(max_size=500), level=st.sampled_from((1, 6, 9)))
def test_joined_pieces_and_a_tail_are_one_gzip_member(
    parts: list[bytes], tail: bytes, level: int
) -> None:
    body = gzipjoin.join([gzipjoin.deflate(p, level) for p in parts])
    head, end = gzipjoin.finish(body, tail, level)
    stream = head + body.raw + end
    text = b"".join(parts) + tail
    assert gzip.decompress(stream) == text
    # One member, ended where the stream ends: readers that stop after one member see it all.
    reader = zlib.decompressobj(31)
    assert reader.decompress(stream) == text
    assert reader.eof and not reader.unused_data


@given(size=st.integers(min_value=0, max_value=40_000), seed=st.integers(0, 2**32 - 1))
def test_a_window_sized_to_the_text_finds_every_match_the_largest_finds(
    size: int, seed: int
) -> None:
    # A text whose end repeats its start from as far back as it can: the largest window
    # matches it, and so must the one sized to the text, or the piece grows.
    filler = random.Random(seed).randbytes(max(0, size - 64))
    text = (filler[:32] + filler + filler[:32])[:size]
    whole = zlib.compressobj(6, zlib.DEFLATED, -15)
    largest = whole.compress(text) + whole.flush(zlib.Z_SYNC_FLUSH)
    sized = gzipjoin.raw_deflate(text, 6)
    assert sized == largest
    assert gzipjoin.inflate(sized, len(text)) == text
