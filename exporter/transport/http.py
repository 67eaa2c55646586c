"""The transport: a pool of keep-alive connections per target, each request sent whole and its
reply read under the cap (`exporter.transport.connection`).

At most `max_concurrency` requests are in flight (the client's semaphore), so the pool opens at
most that many connections and keeps as many idle. An idle one is kept KEEPALIVE seconds: a
target's calls are paced over its round, often more than 15 s apart, and a pool that lets go of
its connections between them opens them again (and shakes hands again, with TLS) several
times a round; most load balancers keep an idle connection 60 s. The most recently used one
goes first, so the others age out when fewer are needed.

A request comes here once the gate admitted it (`exporter.transport.limited`): a call that will
not be sent never takes a connection, new or pooled. `limits.timeout` covers the request from
here until its reply is read; a request that ends any other way than with its whole reply
closes its connection.

An idempotent request (GET) whose connection closes before any byte of its reply is written
once more, on a new connection: a pooled connection the server closed while it was idle looks
just so. `resent` is told of that extra write, which the provider counts too. A POST (every
AIHC read) is never written twice.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import urlsplit

from exporter import __version__
from exporter.configkit import Limits
from exporter.transport.connection import ConnectFailed, Connection, Disconnected
from exporter.transport.iface import ApiResponse, PreparedRequest

KEEPALIVE = 55.0
IDEMPOTENT = frozenset({"GET", "OPTIONS", "TRACE", "PUT", "DELETE"})
# Their replies' heads do not say where the reply ends (a HEAD reply's Content-Length is the
# GET's), which the connection's parser cannot be told: refused before anything is written.
_UNREADABLE = frozenset({"HEAD", "CONNECT"})
USER_AGENT = f"training-job-exporter/{__version__}"
# Written unless the request has its own. A reply is decompressed before the cap counts it.
DEFAULT_HEADERS = {"Accept": "*/*", "Accept-Encoding": "gzip, deflate", "User-Agent": USER_AGENT}
# Framing is the transport's to write: a request's own would be sent twice or contradict it.
_FRAMING = frozenset({"transfer-encoding", "connection"})
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class Origin(NamedTuple):
    host: str
    port: int
    tls: bool
    # The Host header, when the request has none.
    authority: str


@functools.lru_cache(maxsize=64)
def _origin(prefix: str) -> Origin:
    """The origin of a URL's scheme://authority part; ValueError for anything but http(s)."""
    parts = urlsplit(prefix)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {prefix[:100]!r}")
    tls = parts.scheme == "https"
    port = parts.port or (443 if tls else 80)
    return Origin(parts.hostname, port, tls, parts.netloc.rpartition("@")[2])


def split_url(url: str) -> tuple[Origin, str]:
    """(origin, request target): the target is the URL's path and query, sent as they are."""
    start = url.find("//") + 2
    ends = [i for i in (url.find("/", start), url.find("?", start)) if i >= 0]
    cut = min(ends) if ends else len(url)
    target = url[cut:].partition("#")[0]
    if target.startswith("?"):
        target = "/" + target
    return _origin(url[:cut]), target or "/"


def encode(request: PreparedRequest, origin: Origin, target: str) -> bytes:
    """The request as it goes on the wire. ValueError for a header that would split it, or a
    method whose reply could not be read."""
    if request.method in _UNREADABLE:
        raise ValueError(f"{request.method} replies cannot be read by this client")
    lines = [f"{request.method} {target} HTTP/1.1"]
    given = set()
    for name, value in request.headers.items():
        lower = name.lower()
        if lower in _FRAMING:
            continue
        given.add(lower)
        lines.append(f"{name}: {value}")
    if "host" not in given:
        lines.append(f"Host: {origin.authority}")
    body = request.body or b""
    if "content-length" not in given and (body or request.method in _BODY_METHODS):
        lines.append(f"Content-Length: {len(body)}")
    lines.extend(
        f"{name}: {value}" for name, value in DEFAULT_HEADERS.items() if name.lower() not in given
    )
    if " " in target or any("\r" in line or "\n" in line for line in lines):
        raise ValueError("a header or the target would split the request")
    head = "\r\n".join(lines)
    return head.encode("latin-1") + b"\r\n\r\n" + body


class HttpTransport:
    def __init__(self, limits: Limits, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._clock = clock
        # Per origin, idle connections, the one given back last at the end.
        self._idle: dict[Origin, list[Connection]] = {}
        self._busy: set[Connection] = set()
        self._tls: ssl.SSLContext | None = None

    async def send(self, request: PreparedRequest, resent: Callable[[], None]) -> ApiResponse:
        """One attempt, admitted already. Raises `ReplyTooLarge`, `TimeoutError` (no reply
        within `timeout`) or `TransportError`; never retries but as the module says."""
        origin, target = split_url(request.url)
        data = encode(request, origin, target)
        writes = 2 if request.method in IDEMPOTENT else 1
        async with asyncio.timeout(self.limits.timeout):
            for write in range(writes):
                if write:
                    resent()
                connection = await self._connection(origin)
                try:
                    response = await connection.exchange(data, self.limits.max_reply_bytes)
                except Disconnected:
                    self._busy.discard(connection)
                    if write + 1 < writes and not connection.replied:
                        continue
                    raise
                except BaseException:
                    self._busy.discard(connection)
                    connection.close()
                    raise
                self._release(origin, connection)
                return response
        raise AssertionError("unreachable")

    async def _connection(self, origin: Origin) -> Connection:
        """The pool's most recently used live connection to `origin`, or a new one."""
        idle = self._idle.get(origin, [])
        now = self._clock()
        while idle and (idle[0].closed or now - idle[0].idle_since >= KEEPALIVE):
            idle.pop(0).close()
        while idle:
            connection = idle.pop()
            if not connection.closed:
                self._busy.add(connection)
                return connection
        loop = asyncio.get_running_loop()
        try:
            _, connection = await loop.create_connection(
                Connection, origin.host, origin.port, ssl=self._context() if origin.tls else None
            )
        except OSError as exc:  # DNS, refused, unreachable, TLS (ssl.SSLError)
            raise ConnectFailed(type(exc).__name__) from exc
        self._busy.add(connection)
        return connection

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    def _release(self, origin: Origin, connection: Connection) -> None:
        self._busy.discard(connection)
        if connection.closed:
            return
        connection.idle_since = self._clock()
        self._idle.setdefault(origin, []).append(connection)
        if sum(map(len, self._idle.values())) > self.limits.max_concurrency:
            # Keep at most max_concurrency idle, across origins: the longest idle goes.
            _, oldest = min((cs[0].idle_since, o) for o, cs in self._idle.items() if cs)
            self._idle[oldest].pop(0).close()

    async def close(self) -> None:
        for connection in [*self._busy, *(c for cs in self._idle.values() for c in cs)]:
            connection.close()
        self._idle.clear()
        self._busy.clear()
        await asyncio.sleep(0)
