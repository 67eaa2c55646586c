"""Our bce-auth-v1 signer against the official bce-python-sdk's, on random requests."""

from __future__ import annotations

from typing import Any

from baidubce.auth import bce_v1_signer
from baidubce.auth.bce_credentials import BceCredentials
from baidubce.utils import get_canonical_querystring, normalize_string
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.providers.aihc.signer import (
    Credentials,
    canonical_query,
    encode,
    encode_path,
    sign,
)

RESERVED = "!#$&'()*+,/:;=?@[]%\"<>\\^`{|} ~._-"
# Letters, digits, reserved characters, Chinese, emoji, combining marks and odd whitespace.
TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(RESERVED),
        st.characters(codec="utf-8"),
        st.sampled_from("任务队列训练百舸é\u0301\u3000\u00a0\u2028\t\x0b😀"),
    ),
    max_size=24,
)
HEADER_NAMES = st.one_of(
    st.sampled_from(
        [
            "Host",
            "host",
            " Content-Type ",
            "Content-Length",
            "content-md5",
            "x-bce-date",
            "X-Bce-Request-Id",
            "x-bce-meta-任务",
            "X-API-Version",
            "User-Agent",
            "Authorization",
            "X-BCE-SECURITY-TOKEN",
        ]
    ),
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12
    ),
)
HEADER_VALUES = st.one_of(TEXT, st.just(""), st.just("   "), st.integers(0, 10**12))
METHODS = st.one_of(
    st.sampled_from(["GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"]),
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=8),
)
QUERY = st.dictionaries(
    TEXT, st.one_of(TEXT, st.just(""), st.none(), st.integers(-5, 10**6)), max_size=6
)
TIMESTAMPS = st.one_of(
    st.integers(1, 4_102_444_800),
    st.floats(1, 4_102_444_800, allow_nan=False, allow_infinity=False),
)


@st.composite
def paths(draw: st.DrawFn) -> str:
    raw = "/" + "/".join(draw(st.lists(TEXT, max_size=5)))
    # The client signs the encoded path; the SDK signs whatever it is handed: try both.
    return draw(st.sampled_from([raw, encode_path(raw)]))


def _b(value: Any) -> Any:
    return value.encode("utf-8") if isinstance(value, str) else value


def sdk_sign(
    ak: str,
    sk: str,
    method: str,
    path: str,
    headers: dict[str, Any],
    params: dict[str, Any],
    timestamp: float,
    expiration: int,
    headers_to_sign: list[str] | None,
) -> bytes:
    result: bytes = bce_v1_signer.sign(
        BceCredentials(_b(ak), _b(sk)),
        _b(method),
        _b(path),
        {_b(k): v for k, v in headers.items()},
        params,
        timestamp,
        expiration,
        None if headers_to_sign is None else [_b(h) for h in headers_to_sign],
    )
    return result


@settings(max_examples=500, deadline=None)
@given(
    ak=st.text(
        alphabet=st.characters(codec="utf-8", exclude_characters="/"), min_size=1, max_size=40
    ),
    sk=st.text(min_size=1, max_size=40),
    method=METHODS,
    path=paths(),
    headers=st.dictionaries(HEADER_NAMES, HEADER_VALUES, max_size=8),
    params=QUERY,
    timestamp=TIMESTAMPS,
    expiration=st.sampled_from([1800, 60, 3600, 1]),
    headers_to_sign=st.one_of(
        st.none(),
        st.just([]),
        st.lists(
            st.sampled_from(["host", "content-type", "x-bce-date", "content-length"]),
            min_size=1,
            max_size=4,
            unique=True,
        ),
    ),
)
def test_authorization_matches_the_sdk_byte_for_byte(
    ak: str,
    sk: str,
    method: str,
    path: str,
    headers: dict[str, Any],
    params: dict[str, Any],
    timestamp: float,
    expiration: int,
    headers_to_sign: list[str] | None,
) -> None:
    ours = sign(
        Credentials(ak, sk), method, path, headers, params, timestamp, expiration, headers_to_sign
    )
    theirs = sdk_sign(ak, sk, method, path, headers, params, timestamp, expiration, headers_to_sign)
    assert ours.encode("utf-8") == theirs


@settings(max_examples=200, deadline=None)
@given(value=TEXT)
def test_encoding_matches_the_sdk(value: str) -> None:
    assert encode(value).encode() == normalize_string(value)
    assert encode_path(value).encode() == normalize_string(value, False)


@settings(max_examples=200, deadline=None)
@given(params=QUERY)
def test_canonical_query_matches_the_sdk(params: dict[str, Any]) -> None:
    assert canonical_query(params).encode() == get_canonical_querystring(params, True)


def test_a_known_request_signs_as_the_sdk_documents() -> None:
    # The shape the exporter sends for DescribeJobs.
    headers = {
        "Host": "aihc.bj.baidubce.com",
        "Content-Type": "application/json",
        "Content-Length": "42",
        "x-bce-date": "2025-05-13T02:28:26Z",
        "X-API-Version": "v2",
    }
    params = {"action": "DescribeJobs", "resourcePoolId": "cce-1uji3ib5", "queueID": "训练"}
    auth = sign(Credentials("AK", "SK"), "POST", "/", headers, params, 1747103306)
    prefix, _, signature = auth.rpartition("/")
    assert prefix == "bce-auth-v1/AK/2025-05-13T02:28:26Z/1800/"
    assert len(signature) == 64
    assert auth.encode() == sdk_sign(
        "AK", "SK", "POST", "/", headers, params, 1747103306, 1800, None
    )


def test_credentials_repr_hides_both_keys() -> None:
    text = repr(Credentials("AKIDEXAMPLE", "super-secret-sk"))
    assert "AKIDEXAMPLE" not in text and "super-secret-sk" not in text


def test_cached_parts_never_stand_in_for_equal_values_of_another_type() -> None:
    """1, 1.0 and True are one dict key but sign as "1", "1.0" and "True"."""
    for value in (1, 1.0, True, 1, b"1"):
        params = {"a": value}
        headers = {"Host": "h", "x-bce-meta": value}
        ours = sign(Credentials("ak", "sk"), "GET", "/", headers, params, 1_700_000_000)
        theirs = sdk_sign("ak", "sk", "GET", "/", headers, params, 1_700_000_000, 1800, None)
        assert ours.encode("utf-8") == theirs, value
