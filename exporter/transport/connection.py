"""One keep-alive HTTP/1.1 connection to a provider: a request written whole, its reply read by
httptools (llhttp, the parser of aiohttp's own C reader and of Node) under the reply cap.

A provider call needs little of a general client: no redirects, cookies, proxies, streaming or
pipelining, one request at a time per connection. aiohttp's client cost about as much CPU as
the rest of a call together; this one costs under half of it (bench/README, issue 38).

The body is kept as it arrives, decompressed first when the server chose gzip or deflate, and
counted against the cap as it grows: a reply that declares or reaches more than `limit` bytes
fails with `ReplyTooLarge` and its connection is closed, not drained. Bytes on the wire are
bounded too, whatever the body decodes to: a head over MAX_HEAD is a `BadReply`, and a reply of
more than twice the cap (framing, trailers) is too large. An interim (1xx) reply is skipped;
trailers are ignored. A reply with neither a length nor chunks ends when the server closes.
"""

from __future__ import annotations

import asyncio
import zlib

import httptools
from multidict import CIMultiDict

from exporter.transport.iface import ApiResponse
from exporter.transport.reply import ReplyTooLarge

# A reply's status line and headers (interim replies' too), at most: aiohttp's own limit is
# 8 KiB a line. A longer head fails the call as `BadReply`.
MAX_HEAD = 64 * 1024
# Any `Content-Encoding` but these is refused: the body could not be read.
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class TransportError(Exception):
    """No usable reply: no connection, a connection lost before its reply ended, or a reply
    that is not HTTP. Its class name is the failure's message."""


class ConnectFailed(TransportError):
    """The connection could not be made (DNS, refused, TLS)."""


class Disconnected(TransportError):
    """The connection closed (or was reset) before the reply was whole."""


class BadReply(TransportError):
    """The reply is not valid HTTP/1.1, or its content coding cannot be read."""


class Connection(asyncio.Protocol):
    """A connection that exchanges one request for one reply at a time (`exchange`); it closes
    itself after a reply that does not keep it alive, so `closed` says whether it can be
    used again."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        # When it was last given back to the pool (the pool's clock).
        self.idle_since = 0.0
        # It refers back to this protocol: dropped when the connection is lost, so that the
        # pair goes by reference counts, not at the cyclic collector's next full collection.
        self._parser: httptools.HttpResponseParser | None = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[ApiResponse] | None = None
        self._limit = 0
        # Whether any byte of the current reply came: a request is resent only before.
        self.replied = False
        # The reply being read.
        self._headers: list[tuple[str, str]] = []
        self._parsed: CIMultiDict[str] | None = None
        self._received = 0
        self._status = 0
        self._body: list[bytes] = []
        self._size = 0
        self._inflate: zlib._Decompress | None = None
        self._until_close = False

    async def exchange(self, data: bytes, limit: int) -> ApiResponse:
        """Write `data` (a whole request) and read its reply, of at most `limit` bytes."""
        if self.closed or self.transport is None:
            raise Disconnected("connection closed")
        self._waiter = asyncio.get_running_loop().create_future()
        self._limit = limit
        self.replied = False
        self._reset()
        self.transport.write(data)
        return await self._waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _reset(self) -> None:
        self._headers, self._parsed, self._body, self._size, self._received = [], None, [], 0, 0
        self._status, self._inflate, self._until_close = 0, None, False

    def _fail(self, error: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        self._reset()  # what was read goes now, not with the connection
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        self.close()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:
            # Bytes when no request is out: the server is out of step; use it no more.
            self.close()
            return
        self.replied = True
        self._received += len(data)
        assert self._parser is not None
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(BadReply(exc.__class__.__name__))
            return
        if self._waiter is None:
            return
        if self._parsed is None and self._received > MAX_HEAD:
            self._fail(BadReply(f"reply head over {MAX_HEAD} bytes"))
        elif self._received > 2 * self._limit + MAX_HEAD:
            self._fail(ReplyTooLarge(self._limit))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None:
            if self._status and self._until_close and exc is None:
                self.on_message_complete()
            else:
                self._fail(Disconnected("connection lost" if exc is None else type(exc).__name__))
        self._parser = None

    # httptools' callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._parsed is None:  # not a trailer
            self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if status < 200:
            self._headers = []
            return
        self._status = status
        self._parsed = headers = CIMultiDict(self._headers)
        declared = headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self._limit:
            self._fail(ReplyTooLarge(self._limit, int(declared)))
            return
        coding = headers.get("Content-Encoding", "identity").strip().lower()
        if coding in _WBITS:
            self._inflate = zlib.decompressobj(_WBITS[coding])
        elif coding != "identity":
            self._fail(BadReply(f"content coding {coding[:20]!r}"))
            return
        chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
        self._until_close = declared is None and not chunked and status not in (204, 304)

    def on_body(self, body: bytes) -> None:
        if self._waiter is None:
            return
        if self._inflate is not None:
            body = self._inflated(body)
        self._size += len(body)
        if self._size > self._limit:
            self._fail(ReplyTooLarge(self._limit))
            return
        self._body.append(body)

    def _inflated(self, data: bytes) -> bytes:
        """`data` decompressed: never more than one byte past what the cap has room for."""
        assert self._inflate is not None
        try:
            return self._inflate.decompress(data, self._limit - self._size + 1)
        except zlib.error:
            self._fail(BadReply("content coding: invalid data"))
            return b""

    def on_message_complete(self) -> None:
        waiter = self._waiter
        if waiter is None or not self._status:
            return  # an interim reply, or one that failed already
        self._waiter = None
        assert self._parser is not None
        assert self._parsed is not None
        reply = ApiResponse(self._status, self._parsed, b"".join(self._body))
        if not self._parser.should_keep_alive() or self._until_close:
            self.close()
        self._reset()
        if not waiter.done():
            waiter.set_result(reply)
