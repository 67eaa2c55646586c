"""The hand-written WriteRequest is what Google's protobuf runtime reads, for any labels,
values and times; the body is snappy's block format, not the framed one."""

from __future__ import annotations

import math

import cramjam
from hypothesis import given
from hypothesis import strategies as st

from exporter.backfill import prompb
from tests.backfill.remote_helpers import WriteRequest, parse

# Six varint bytes: every timestamp from 1971 to 2109, packed in one go.
SIX_BYTES = st.integers(2**35 - 2, 2**42 + 2)
label_text = st.text(st.characters(codec="utf-8"), max_size=40)
series = st.tuples(
    st.lists(st.tuples(label_text, label_text), max_size=6),
    st.lists(
        st.tuples(
            # Whole milliseconds, ±1,100 years around 1970 (a negative int64 is ten varint bytes).
            st.one_of(st.integers(-(2**45), 2**45), SIX_BYTES).map(lambda ms: ms / 1000),
            st.floats(allow_nan=True, allow_infinity=True),
        ),
        max_size=20,
    ),
)


# A request is its series' fields one after another, nothing carried from one to the next
# but the labels' cache: two series show order, lengths and a repeated series as eight do,
# at a third of the drawing.
@given(st.lists(series, max_size=2))
def test_google_protobuf_reads_what_is_written(request: list) -> None:
    got = parse(prompb.write_request(request))
    assert len(got) == len(request)
    for (labels, points), (got_labels, got_points) in zip(request, got):
        assert list(got_labels) == labels
        assert len(got_points) == len(points)
        for (at, value), (got_at, got_value) in zip(points, got_points):
            assert got_at == at
            assert got_value == value or (math.isnan(value) and math.isnan(got_value))


@given(st.one_of(st.integers(-(2**45), 2**45), SIX_BYTES))
def test_a_timestamp_is_protobufs_int64(ms: int) -> None:
    request = WriteRequest()
    request.ParseFromString(prompb.write_request([([], [(ms / 1000, 1.0)])]))
    assert request.timeseries[0].samples[0].timestamp == ms


@given(st.integers(-(2**63), 2**64 - 1))
def test_varint_length(number: int) -> None:
    unsigned = number + 2**64 if number < 0 else number
    assert len(prompb.varint(number)) == max(1, -(-unsigned.bit_length() // 7))


def test_the_body_is_the_snappy_block_format() -> None:
    body = prompb.write_request([([("__name__", "up")], [(1.5, 1.0)])])
    compressed = prompb.compress(body)
    assert bytes(cramjam.snappy.decompress_raw(compressed)) == body
    # The framed format starts with its stream identifier chunk; the block format with the
    # uncompressed length as a varint.
    assert not compressed.startswith(b"\xff\x06\x00\x00sNaPpY")
    assert compressed.startswith(prompb.varint(len(body)))


def test_the_protocols_headers() -> None:
    assert prompb.HEADERS == {
        "Content-Encoding": "snappy",
        "Content-Type": "application/x-protobuf",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
    }
