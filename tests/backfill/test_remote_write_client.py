"""The remote-write client against a fake store on a real socket (plain and TLS), with its
sleeps recorded instead of slept: what it retries and after how long, what it refuses, what
stops it, and what it sends besides the body. Each case counts the requests the store got."""

from __future__ import annotations

import email.utils
import ssl
import time
from pathlib import Path

import pytest
import trustme
from aiohttp import web

from bench.ports import free_port
from exporter.backfill import prompb
from exporter.backfill.remote_write import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    MAX_WAIT,
    MESSAGE_BYTES,
    Auth,
    RemoteWriteClient,
    StoreStopped,
    reason,
)
from exporter.redaction import MESSAGE_CHARS
from tests.backfill.remote_helpers import FakeStore

BODY = prompb.compress(prompb.write_request([([("__name__", "up")], [(1.0, 1.0)])]))


class Sleeps:
    def __init__(self) -> None:
        self.slept: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)


def client_for(
    store: FakeStore, sleeps: Sleeps, auth: Auth | None = None, **kw: int
) -> RemoteWriteClient:
    return RemoteWriteClient(store.url, auth or Auth(), sleep=sleeps, **kw)


def answers(*replies: tuple[int, str, dict[str, str]] | None) -> object:
    """The store's answers in turn, then 204s."""
    queue = list(replies)
    return lambda n, _: queue[n - 1] if n <= len(queue) else None


async def test_429_waits_as_long_as_retry_after_says(store: FakeStore) -> None:
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    store.answer = answers(
        (429, "slow down", {"Retry-After": "7"}), (429, "", {"Retry-After": when})
    )
    sleeps = Sleeps()
    client = client_for(store, sleeps)
    try:
        answer = await client.send(BODY)
    finally:
        await client.close()
    assert answer.status == 204 and answer.refused is None
    assert len(store.requests) == 3
    assert sleeps.slept[0] >= 7 and 25 <= sleeps.slept[1] <= 31
    assert client.retried == {"429": 2} and client.requests == 3


async def test_5xx_backs_off_and_gives_up_after_its_retries(store: FakeStore) -> None:
    store.answer = lambda n, _: (503, "unavailable", {})
    sleeps = Sleeps()
    client = client_for(store, sleeps, retries=4)
    try:
        with pytest.raises(
            StoreStopped, match=r"no success after 5 attempts \(last: 503 unavailable"
        ):
            await client.send(BODY)
    finally:
        await client.close()
    assert len(store.requests) == 5
    assert len(sleeps.slept) == 4
    for attempt, slept in enumerate(sleeps.slept):
        assert 0 <= slept <= min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)


async def test_a_retry_after_past_the_longest_wait_stops_the_run(store: FakeStore) -> None:
    store.answer = answers((429, "", {"Retry-After": str(int(MAX_WAIT) + 1)}))
    sleeps = Sleeps()
    client = client_for(store, sleeps)
    try:
        with pytest.raises(StoreStopped, match="asks to wait 601 s"):
            await client.send(BODY)
    finally:
        await client.close()
    assert len(store.requests) == 1 and sleeps.slept == []


@pytest.mark.parametrize(
    "status, text, why",
    [
        (400, "out of bounds", "too_old"),
        (400, "out of order sample", "out_of_order"),
        (400, "duplicate sample for timestamp", "duplicate"),
        # Prometheus 2.42 outside its out-of-order window (observed).
        (500, "too old sample", "too_old"),
        (409, "store locally for endpoint: out of bounds", "too_old"),
        (400, "err-mimir-sample-timestamp-too-old: the sample has been rejected", "too_old"),
        (400, "per-user series limit of 150000 exceeded", "over_limit"),
        (413, "", "over_limit"),
        (422, "cannot parse labels", "other"),
    ],
)
async def test_a_refusal_is_not_retried(store: FakeStore, status: int, text: str, why: str) -> None:
    store.answer = answers((status, text, {"Retry-After": "1"}))
    sleeps = Sleeps()
    client = client_for(store, sleeps)
    try:
        answer = await client.send(BODY)
    finally:
        await client.close()
    assert (answer.status, answer.refused, answer.message) == (status, why, text)
    assert len(store.requests) == 1 and sleeps.slept == [] and not client.retried


async def test_a_refusals_message_is_bounded_and_redacted(store: FakeStore) -> None:
    secret = "hunter2-very-secret"
    text = f"bad request from ?token={secret} Authorization: Bearer {secret} " + "x" * 100_000
    store.answer = answers((400, text, {}))
    client = client_for(store, Sleeps(), Auth(token=secret))
    try:
        answer = await client.send(BODY)
    finally:
        await client.close()
    assert secret not in answer.message
    assert len(answer.message) <= MESSAGE_CHARS < MESSAGE_BYTES
    assert answer.message.startswith("bad request from ?[REDACTED]")


@pytest.mark.parametrize("status", [401, 403, 404, 405])
async def test_credentials_or_a_wrong_url_stop_at_once(store: FakeStore, status: int) -> None:
    store.answer = answers((status, "no", {}))
    client = client_for(store, Sleeps())
    try:
        with pytest.raises(StoreStopped, match=f"answered HTTP {status}: no"):
            await client.send(BODY)
    finally:
        await client.close()
    assert len(store.requests) == 1


async def test_a_refused_connection_is_retried_then_stops() -> None:
    sleeps = Sleeps()
    client = RemoteWriteClient(
        f"http://127.0.0.1:{free_port()}/api/v1/write", Auth(), sleep=sleeps, retries=2
    )
    try:
        with pytest.raises(StoreStopped, match=r"no success after 3 attempts \(last: error"):
            await client.send(BODY)
    finally:
        await client.close()
    assert len(sleeps.slept) == 2 and client.retried == {"error": 2}


async def test_the_protocols_headers_and_the_credentials(store: FakeStore, tmp_path: Path) -> None:
    clients = [
        client_for(store, Sleeps(), Auth(token="tok-123", headers={"X-Scope-OrgID": "team-a"})),
        client_for(store, Sleeps(), Auth(user="alice", password="pw-456")),
    ]
    try:
        for client in clients:
            await client.send(BODY)
    finally:
        for client in clients:
            await client.close()
    bearer, basic = (r.headers for r in store.requests)
    for headers in (bearer, basic):
        assert {k: headers[k] for k in prompb.HEADERS} == prompb.HEADERS
        assert headers["User-Agent"].startswith("training-job-exporter/")
    assert bearer["Authorization"] == "Bearer tok-123" and bearer["X-Scope-OrgID"] == "team-a"
    assert basic["Authorization"] == "Basic YWxpY2U6cHctNDU2"
    assert "X-Scope-OrgID" not in basic


async def test_tls_with_a_ca_file_and_a_client_certificate(
    store: FakeStore, tmp_path: Path
) -> None:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1")
    client_cert = ca.issue_cert("backfill@example")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.configure_cert(context)
    ca.configure_trust(context)
    context.verify_mode = ssl.CERT_REQUIRED
    app = web.Application()
    app.router.add_post("/api/v1/write", store.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context).start()
    port = runner.addresses[0][1]
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    client_cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    client_cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    url = f"https://127.0.0.1:{port}/api/v1/write"
    with_cert = Auth(
        ca_file=str(tmp_path / "ca.pem"),
        cert_file=str(tmp_path / "cert.pem"),
        key_file=str(tmp_path / "key.pem"),
    )
    sent = RemoteWriteClient(url, with_cert, sleep=Sleeps())
    without = RemoteWriteClient(
        url, Auth(ca_file=str(tmp_path / "ca.pem")), sleep=Sleeps(), retries=0
    )
    try:
        assert (await sent.send(BODY)).status == 204
        with pytest.raises(StoreStopped, match="no success after 1 attempts"):
            await without.send(BODY)
    finally:
        await sent.close()
        await without.close()
        await runner.cleanup()
    assert len(store.requests) == 1


def test_reasons_are_a_closed_set() -> None:
    assert reason(400, "something nobody planned for") == "other"
    assert reason(400, "") == "other"
