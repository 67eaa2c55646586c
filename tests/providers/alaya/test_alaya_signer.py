"""The job list's access-key signature against a vector from another client."""

from __future__ import annotations

from exporter.providers.alaya.signer import authorization


def test_a_public_clients_vector() -> None:
    # From a public Swift client's unit test of the same scheme (secret "test-secret").
    header = authorization(
        "test-access", "test-secret", 123456, "get", "/api/osm/v1/product/list-for-training-task"
    )
    assert header == (
        "alayanew-HMAC-SHA256 test-access:123456:"
        "75b861affb0513a335904a768af94f065b1fe0eb2fe980b5223883b151db639b"
    )


def test_the_query_is_not_signed() -> None:
    path = "/api/osm/v1/training/instance/list"
    assert authorization("a", "s", 1, "GET", path + "?pageNo=2&pageSize=100") == authorization(
        "a", "s", 1, "GET", path
    )
