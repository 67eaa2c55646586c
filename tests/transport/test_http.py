"""The transport on real sockets: what it writes, how it reads what servers send back, and the
connections it keeps. Scripted servers write exact bytes; TLS is a real handshake."""

from __future__ import annotations

import asyncio
import gc
import gzip
import ssl
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trustme
from aiohttp import web

from exporter.config import Limits
from exporter.transport.connection import BadReply, ConnectFailed
from exporter.transport.http import KEEPALIVE, HttpTransport
from exporter.transport.iface import PreparedRequest
from exporter.transport.reply import ReplyTooLarge

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A loopback server running `script` for each connection, counting what reached it."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        # Connections the client closed or reset (these servers never close one first).
        self.closed_by_client = 0
        self.requests: list[bytes] = []
        self.url = ""
        self.handlers: set[asyncio.Task[None]] = set()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            await self.script(reader, writer)
        except ConnectionError:
            self.closed_by_client += 1
        finally:
            writer.close()

    async def closed(self, count: int) -> int:
        """Connections the client closed, once `count` of them are (5 s at most)."""
        for _ in range(500):
            if self.closed_by_client >= count:
                break
            await asyncio.sleep(0.01)
        return self.closed_by_client

    async def request(self, reader: asyncio.StreamReader) -> bytes | None:
        """One request's head and body (by its Content-Length); None when the client closed."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            self.closed_by_client += 1
            return None
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        self.requests.append(head + await reader.readexactly(length))
        return self.requests[-1]


@asynccontextmanager
async def serving(script: Script) -> AsyncIterator[Server]:
    server = Server(script)
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    try:
        yield server
    finally:
        listener.close()
        for task in server.handlers:
            task.cancel()
        await asyncio.gather(*server.handlers, return_exceptions=True)


def ok(body: bytes = b"{}", *headers: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def never_resent() -> None:
    raise AssertionError("resent")


async def test_requests_share_one_kept_connection_until_it_was_idle_keepalive_seconds() -> None:
    async def keep_answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader) is not None:
            writer.write(ok())

    clock = Clock()
    async with serving(keep_answering) as server:
        transport = HttpTransport(Limits(), clock)
        request = PreparedRequest("GET", f"{server.url}/v1/a?x=1")
        for _ in range(10):
            assert (await transport.send(request, never_resent)).status == 200
        assert (server.connections, len(server.requests)) == (1, 10)
        clock.now += KEEPALIVE - 0.1
        await transport.send(request, never_resent)
        assert server.connections == 1
        clock.now += KEEPALIVE
        await transport.send(request, never_resent)
        await transport.close()
        # The connection idle too long was closed by the client, not used.
        assert await server.closed(2) == 2
    assert (server.connections, len(server.requests)) == (2, 12)


async def test_at_most_max_concurrency_connections_stay_idle() -> None:
    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader) is not None:
            await asyncio.sleep(0.05)
            writer.write(ok())

    async with serving(slow) as server:
        transport = HttpTransport(Limits(max_concurrency=2))
        request = PreparedRequest("GET", f"{server.url}/")
        await asyncio.gather(*(transport.send(request, never_resent) for _ in range(5)))
        assert (server.connections, await server.closed(3)) == (5, 3)
        await asyncio.gather(*(transport.send(request, never_resent) for _ in range(2)))
        assert server.connections == 5
        await transport.close()


async def test_what_is_written_host_length_and_defaults_and_nothing_that_splits_a_request() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader) is not None:
            writer.write(ok())

    async with serving(answer) as server:
        transport = HttpTransport(Limits())
        await transport.send(PreparedRequest("GET", f"{server.url}?q=1"), never_resent)
        signed = {"Host": "api.example", "Content-Length": "2", "X-Sig": "s"}
        await transport.send(
            PreparedRequest("POST", f"{server.url}/p", signed, b"{}"), never_resent
        )
        await transport.send(PreparedRequest("POST", f"{server.url}/empty"), never_resent)
        for bad in ({"X": "a\r\nInjected: 1"}, {"X\nY": "a"}):
            with pytest.raises(ValueError):
                await transport.send(PreparedRequest("GET", server.url, bad), never_resent)
        await transport.close()
    port = server.url.rpartition(":")[2]
    first = server.requests[0].split(b"\r\n")
    assert first[:2] == [b"GET /?q=1 HTTP/1.1", f"Host: 127.0.0.1:{port}".encode()]
    assert {b"Accept: */*", b"Accept-Encoding: gzip, deflate"} < set(first)
    assert any(line.startswith(b"User-Agent: training-job-exporter/") for line in first)
    # A request's own Host and Content-Length (signed) are sent as they are, once.
    assert server.requests[1].startswith(
        b"POST /p HTTP/1.1\r\nHost: api.example\r\nContent-Length: 2\r\nX-Sig: s\r\n"
    )
    assert server.requests[1].count(b"Content-Length") == 1
    assert server.requests[1].endswith(b"\r\n\r\n{}")
    assert b"\r\nContent-Length: 0\r\n" in server.requests[2]
    assert len(server.requests) == 3


@pytest.mark.parametrize("method", ["HEAD", "CONNECT"])
async def test_a_method_whose_reply_has_no_readable_end_is_refused_before_a_connection(
    method: str,
) -> None:
    """A HEAD reply declares the GET's Content-Length and sends no body: the parser would wait
    for it until the timeout, on a connection then closed."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader) is not None:
            writer.write(ok())

    async with serving(answer) as server:
        transport = HttpTransport(Limits())
        with pytest.raises(ValueError, match=f"{method} replies cannot be read"):
            await transport.send(PreparedRequest(method, server.url), never_resent)
        await transport.close()
    assert server.connections == 0


async def test_interim_replies_are_skipped_and_a_reply_without_length_ends_at_close() -> None:
    async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\n")
        writer.write(b"HTTP/1.1 429 Too Many\r\nretry-after: 3\r\nX-A: 1\r\nX-A: 2\r\n\r\n")
        writer.write(b'{"slow": ')
        await writer.drain()
        await asyncio.sleep(0.02)
        writer.write(b"true}")

    async with serving(until_close) as server:
        transport = HttpTransport(Limits())
        reply = await transport.send(PreparedRequest("GET", server.url), never_resent)
        assert (reply.status, reply.body) == (429, b'{"slow": true}')
        assert reply.headers.get("Retry-After") == "3"
        assert "Link" not in reply.headers
        # Not kept: the reply's end was the connection's.
        await transport.send(PreparedRequest("GET", server.url), never_resent)
        assert server.connections == 2
        await transport.close()


def chunked(body: bytes, size: int, *headers: str) -> bytes:
    lines = ["HTTP/1.1 200 OK", "Transfer-Encoding: chunked", *headers]
    out = [("\r\n".join(lines) + "\r\n\r\n").encode()]
    for i in range(0, len(body), size):
        out.append(b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]))
    return b"".join([*out, b"0\r\n\r\n"])


@pytest.mark.parametrize("coding", ["identity", "gzip", "deflate"])
async def test_chunked_and_compressed_replies_are_read_whole(coding: str) -> None:
    body = b'{"points": [' + b"1.5," * 50_000 + b"0]}"
    sent = {"identity": body, "gzip": gzip.compress(body), "deflate": zlib.compress(body)}[coding]

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader) is not None:
            writer.write(chunked(sent, 1000, f"Content-Encoding: {coding}")[:-2])
            writer.write(b"X-Trailer: ignored\r\n\r\n")

    async with serving(answer) as server:
        transport = HttpTransport(Limits())
        for _ in range(2):
            reply = await transport.send(PreparedRequest("GET", server.url), never_resent)
            assert reply.body == body
            assert "X-Trailer" not in reply.headers
        await transport.close()
    assert server.connections == 1


@pytest.mark.parametrize(
    ("reply", "declared"),
    [
        (ok(b"x" * (64 * 1024 + 1)), 64 * 1024 + 1),
        (chunked(b"x" * (64 * 1024 + 1), 4096), None),
        # 10 MiB of zeros in 10 KB: stopped at the cap's first byte over, not inflated whole.
        (ok(gzip.compress(bytes(10 * 1024 * 1024)), "Content-Encoding: gzip"), None),
        # Bytes on the wire count too: a small body, framed by a trailer that never ends.
        (chunked(b"{}", 1)[:-2] + b"X-Trailer: " + b"a" * 200_000, None),
    ],
    ids=["declared", "chunked", "gzip-bomb", "endless-trailer"],
)
async def test_a_reply_over_the_cap_fails_and_its_connection_is_closed(
    reply: bytes, declared: int | None
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader) is not None:
            writer.write(reply)
            await writer.drain()

    async with serving(answer) as server:
        transport = HttpTransport(Limits(max_reply_bytes=64 * 1024))
        with pytest.raises(ReplyTooLarge) as info:
            await transport.send(PreparedRequest("GET", server.url), never_resent)
        await transport.close()
        assert (server.connections, await server.closed(1)) == (1, 1)
    assert ("declares" in str(info.value)) == (declared is not None)


@pytest.mark.parametrize(
    "reply",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        ok(b"{}", "Content-Encoding: br"),
        chunked(b"{}", 1)[:-5] + b"zz",
        b"HTTP/1.1 200 OK\r\nX-Head: " + b"a" * 100_000,
    ],
    ids=["not-http", "unknown-coding", "bad-chunk", "endless-head"],
)
async def test_a_reply_that_is_not_http_is_a_bad_reply(reply: bytes) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await server.request(reader)
        writer.write(reply)
        await asyncio.sleep(1)

    async with serving(answer) as server:
        transport = HttpTransport(Limits())
        with pytest.raises(BadReply):
            await transport.send(PreparedRequest("GET", server.url), never_resent)
        await transport.close()


@pytest.fixture
def ca(tmp_path, monkeypatch) -> trustme.CA:  # type: ignore[no-untyped-def]
    """A CA the client's default context trusts (OpenSSL reads SSL_CERT_FILE)."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    return ca


async def tls_site(ca: trustme.CA, name: str) -> tuple[web.AppRunner, int]:
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"host": request.host})

    app = web.Application()
    app.router.add_get("/hello", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(name).configure_cert(context)
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, runner.addresses[0][1]


async def test_https_verifies_the_server_and_keeps_its_connection(ca: trustme.CA) -> None:
    runner, port = await tls_site(ca, "localhost")
    try:
        transport = HttpTransport(Limits())
        url = f"https://localhost:{port}/hello"
        for _ in range(3):
            reply = await transport.send(PreparedRequest("GET", url), never_resent)
            assert reply.json() == {"host": f"localhost:{port}"}
        await transport.close()
    finally:
        await runner.cleanup()


async def test_https_refuses_a_certificate_for_another_name(ca: trustme.CA) -> None:
    runner, port = await tls_site(ca, "elsewhere.example")
    try:
        transport = HttpTransport(Limits())
        with pytest.raises(ConnectFailed, match="SSLCertVerificationError"):
            await transport.send(PreparedRequest("GET", f"https://localhost:{port}/"), never_resent)
        await transport.close()
    finally:
        await runner.cleanup()


async def test_what_a_failed_reply_held_is_freed_at_once_not_by_the_cyclic_collector() -> None:
    """The exporter's collector runs its full collections minutes apart (`exporter.heap`): a
    connection's buffers must go by reference counts, or every call refused as too large
    keeps up to the cap until then."""
    limit = 1024 * 1024

    async def too_long(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await server.request(reader) is not None:
            writer.write(chunked(b"x" * 2 * limit, 64 * 1024))
            await writer.drain()

    async with serving(too_long) as server:
        transport = HttpTransport(Limits(max_reply_bytes=limit))
        gc.disable()
        tracemalloc.start()
        try:
            for _ in range(6):
                with pytest.raises(ReplyTooLarge):
                    await transport.send(PreparedRequest("GET", server.url), never_resent)
            await asyncio.sleep(0.05)
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
            gc.enable()
        await transport.close()
    assert server.connections == 6
    assert held < limit, held
