"""The AIHC client's signatures, kept a second per request shape (method, URI, query, body
length), against bce-python-sdk's signer on each request as sent: a kept one never stands in
for a request of another shape, another second or other keys."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.signer import CACHED
from exporter.selfmetrics import SelfMetrics
from tests.providers.aihc.test_aihc_signer import sdk_sign
from tests.target_helpers import aihc_target

AK, SK = "ak-client-test", "sk/client+test=="
URL = "https://aihc.bj.baidubce.com/api"
PARAMS = st.sampled_from(
    [
        {"action": "DescribeJobs", "resourcePoolId": "cce-1"},
        {"action": "DescribeJobs", "resourcePoolId": "cce-1", "queueID": "训练"},
        {"action": "DescribeJobMetrics", "resourcePoolId": "cce-1"},
    ]
)
# Bodies alike in length but not in content, and of other lengths.
BODIES = st.sampled_from([b'{"jobId":"a"}', b'{"jobId":"b"}', b'{"jobId":"bb"}', b""])
# Steps of the clock between calls: within a second, across one, or many.
STEPS = st.sampled_from([0.0, 0.25, 1.0, 3600.0])


class Clock:
    def __init__(self) -> None:
        self.now = 1_764_900_000.5

    def __call__(self) -> float:
        return self.now


def client(clock: Clock, sk: str = SK) -> AihcClient:
    target = aihc_target(URL, access_key_id=SecretStr(AK), secret_access_key=SecretStr(sk))
    return AihcClient(target, SelfMetrics(), clock=clock)


def signs_as_the_sdk(
    made: AihcClient,
    clock: Clock,
    method: str,
    params: dict[str, str],
    body: bytes,
    sk: str = SK,
) -> bool:
    """Whether the request `made` signs now carries the Authorization the SDK makes of it,
    and signs the length of its own body."""
    request = made.signed(method, "/api/", params, body)
    headers = dict(request.headers)
    assert headers["Content-Length"] == str(len(request.body or b""))
    ours = headers.pop("Authorization").encode()
    return ours == sdk_sign(AK, sk, method, "/api/", headers, params, clock.now, 1800, None)


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(st.tuples(STEPS, st.sampled_from(["POST", "GET"]), PARAMS, BODIES)))
def test_each_request_carries_the_sdks_signature_of_itself(
    calls: list[tuple[float, str, dict[str, str], bytes]],
) -> None:
    clock = Clock()
    made = client(clock)
    for step, method, params, body in calls:
        clock.now += step
        assert signs_as_the_sdk(made, clock, method, params, body)


def test_more_shapes_in_a_second_than_are_kept_still_sign_each_right() -> None:
    clock = Clock()
    made = client(clock)
    shapes = [{"action": "DescribeJobs", "resourcePoolId": f"cce-{i}"} for i in range(CACHED + 5)]
    for _ in range(2):
        for params in shapes:
            assert signs_as_the_sdk(made, clock, "POST", params, b"{}")


def test_other_keys_sign_on_their_own_in_the_same_second() -> None:
    clock = Clock()
    params = {"action": "DescribeJobs", "resourcePoolId": "cce-1"}
    first = client(clock).signed("POST", "/api/", params, b"{}").headers["Authorization"]
    other = client(clock, sk="another-secret")
    assert other.signed("POST", "/api/", params, b"{}").headers["Authorization"] != first
    assert signs_as_the_sdk(other, clock, "POST", params, b"{}", sk="another-secret")
