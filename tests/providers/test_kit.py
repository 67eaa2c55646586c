"""The provider kit's rules, whatever the input: labels, wire bytes, JSON decoding, numbers."""

from __future__ import annotations

import json
import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.providers.kit.decode import InvalidReply, decode_json
from exporter.providers.kit.labels import MAX_LABEL_LENGTH, label
from exporter.providers.kit.numbers import (
    DROP_REASONS,
    OUT_OF_RANGE,
    UNIT_INTERVAL,
    in_range,
    parse_number,
    scaled,
)
from exporter.providers.kit.states import Seen, fold, with_current
from exporter.providers.kit.wire import json_wire, unwire, wire_bytes

# Any string Python can hold after decoding a reply: lone surrogates included.
anything = st.text(st.characters(codec=None, exclude_categories=()), max_size=30) | st.builds(
    lambda head, n: head * n, st.text(max_size=3), st.integers(0, 1200)
)


@settings(max_examples=300)
@given(value=anything)
def test_a_label_is_valid_bounded_and_stable(value: str) -> None:
    cleaned = label(value)
    cleaned.encode("utf-8")  # never raises
    assert len(cleaned) <= MAX_LABEL_LENGTH
    assert label(cleaned) == cleaned
    assert label(value) == cleaned


@settings(max_examples=300)
@given(a=anything, b=anything)
def test_two_strings_never_become_one_label(a: str, b: str) -> None:
    if a != b:
        assert label(a) != label(b)


def test_common_collisions_of_a_lossy_cleaner_stay_apart() -> None:
    assert label("a\ud800") != label("a\ud801")
    assert label("x" * 2000 + "a") != label("x" * 2000 + "b")
    assert label("plain") == "plain" and label("训练任务") == "训练任务"


@settings(max_examples=300)
@given(value=anything)
def test_wire_bytes_and_json_go_back_to_the_same_string(value: str) -> None:
    # A surrogate pair is one character once decoded from JSON or UTF-8.
    value = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    assert unwire(wire_bytes(value)) == value
    assert decode_json(unwire(json_wire({"k": value}))) == {"k": value}


def test_invalid_bytes_survive_decoding_as_lone_surrogates() -> None:
    assert decode_json(b'{"pod": "p\xff\xfe"}') == {"pod": "p\udcff\udcfe"}
    assert decode_json(b'\xef\xbb\xbf{"a": "tab\tinside"}') == {"a": "tab\tinside"}


JSON_CORNERS = [
    b'"\\ud800 lone"',
    b'"a\nraw newline"',
    b'{"a": 1, "a": 2}',
    b"[NaN, Infinity, -Infinity, 1e400, -0.0, -0]",
    b"123456789012345678901234567890",
    b"[0.1, 5e-324, 2.2250738585072011e-308, 1.7976931348623157e308, 1e23]",
    b"[" * 300 + b"]" * 300,
    b' {"k": "\\/", "n": null, "t": true} ',
]


@pytest.mark.parametrize("body", JSON_CORNERS)
def test_replies_decode_as_json_decodes_them(body: bytes) -> None:
    expected = json.loads(body.decode(), strict=False)
    assert repr(decode_json(body)) == repr(expected)


@given(st.floats(allow_nan=False) | st.integers() | st.text())
def test_numbers_and_strings_decode_as_json_decodes_them(value: object) -> None:
    body = json.dumps([value]).encode("utf-8", "surrogatepass")
    assert repr(decode_json(body)) == repr(json.loads(body.decode("utf-8", "surrogatepass")))


@pytest.mark.parametrize(
    "body", [b"[" * 100_000 + b"]" * 100_000, b"{", b"", b"1" * 5000, b"<html>"]
)
def test_anything_that_is_not_json_is_invalid_reply_only(body: bytes) -> None:
    with pytest.raises(InvalidReply):
        decode_json(body)


@given(raw=st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)))
def test_a_number_is_finite_or_has_a_reason(raw: object) -> None:
    value, reason = parse_number(raw)
    assert (value is None) == (reason is not None)
    assert value is None or math.isfinite(value)
    assert reason is None or reason in DROP_REASONS


def test_ratios_outside_zero_to_one_are_out_of_range() -> None:
    reasons: list[str] = []
    name = "training_pod_gpu_utilization_ratio"
    assert name in UNIT_INTERVAL and "training_pod_rdma_healthy" in UNIT_INTERVAL
    assert in_range(name, -1.0, reasons.append) is None
    assert in_range(name, 12345.0, reasons.append) is None
    assert in_range(name, 1.0, reasons.append) == 1.0
    assert in_range("training_pod_gpu_power_watts", 695.0, reasons.append) == 695.0
    assert reasons == [OUT_OF_RANGE, OUT_OF_RANGE]
    assert parse_number("1_000") == (None, "unparsable")


def test_a_state_set_is_bounded_and_folds_what_does_not_fit_to_other() -> None:
    seen = Seen(["Running"], limit=4)
    assert [seen.add(state) for state in ("A", "B", "C", "D", "", "A")] == [
        "A",
        "B",
        "other",
        "other",
        "",
        "A",
    ]
    assert seen.values == ("Running", "A", "B", "other")
    assert fold(seen.values, "D") == "other" and fold(seen.values, "A") == "A"
    assert with_current(seen.values, fold(seen.values, "D")) == seen.values
    # A fixed set of known states, which never folds, exports an unknown one as it is.
    assert fold(("Running",), "D") == "D"
    assert with_current(("Running",), "D") == ("Running", "D")


@settings(max_examples=500, deadline=None)
@given(
    value=st.floats(allow_nan=False),
    divisor=st.sampled_from([100, 1_000_000_000, 7, 10**18]),
)
def test_scaling_rounds_the_exact_decimal_quotient_once(value: float, divisor: int) -> None:
    assert scaled(value, divisor) == float(Decimal(repr(value)) / divisor)
