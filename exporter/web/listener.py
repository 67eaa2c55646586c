"""The listening socket: a cap on open connections, an idle timeout, and quiet error logs.

Without these guards idle connections are never closed; past the open-file limit every scrape
times out and asyncio logs an "accept() out of system resource" traceback for each try, tens
of thousands a second; a 1 MB request header gets its 400 and a traceback in the log.

- `idle_timeout` (aiohttp's keep-alive timeout, which also covers a connection that never
  sends a request or stops halfway through its headers) closes connections with no request in
  flight.
- At most `max_connections` are open, and never more than half the open-file limit; asyncio
  accepts up to `backlog` sockets before any of them reaches the guard, so the backlog is an
  eighth of the limit, which leaves the rest for the provider connections and files. A new
  connection past the cap closes the one quiet longest among those waiting for a request, so
  idle connections cannot lock a scraper out; only when every open connection has a request
  in flight does the new one get `503` and go. TLS connections count once their handshake is
  done (asyncio hands them over then; its handshake timeout, 60 s, bounds the others).
- `ServerLogFilter` turns a client's bad request into one line without a traceback, drops the
  traceback of socket errors, and lets through at most one line per kind per minute, with the
  count of those held back.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from exporter.logs import LogThrottle, get_logger

log = get_logger(__name__)

_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 27\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
    b"Too many open connections.\n"
)


def connection_cap(max_connections: int) -> tuple[int, int]:
    """(cap, listen backlog): `max_connections` clipped to half the soft open-file limit."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return max_connections, 128
    return max(1, min(max_connections, soft // 2)), max(8, min(128, soft // 8))


class ConnectionGuard:
    """The listener's protocol factory: aiohttp's, with every connection counted and capped."""

    def __init__(self, server: web.Server, cap: int) -> None:
        self._server = server
        self.cap = cap
        # Open connections, the one quiet longest first.
        self._open: OrderedDict[_Counted, None] = OrderedDict()
        self.evicted = 0
        self.refused = 0
        self._notes = LogThrottle()

    def __call__(self) -> asyncio.Protocol:
        return _Counted(self, self._server())

    def admit(self, connection: _Counted) -> bool:
        if len(self._open) >= self.cap and not self._evict_one():
            self.refused += 1
            self._note("connection limit reached: new connection refused", self.refused)
            return False
        self._open[connection] = None
        return True

    def _evict_one(self) -> bool:
        for candidate in self._open:
            if not candidate.closing and candidate.waiting:
                candidate.close()
                self.evicted += 1
                self._note("connection limit reached: closed the longest idle", self.evicted)
                return True
        return False

    def touch(self, connection: _Counted) -> None:
        if connection in self._open:
            self._open.move_to_end(connection)

    def forget(self, connection: _Counted) -> None:
        self._open.pop(connection, None)

    def _note(self, event: str, total: int) -> None:
        self._notes.log(event, log.warning, event, max_connections=self.cap, total=total)


class _Counted(asyncio.Protocol):
    """aiohttp's protocol for one connection, seen by the guard on its way in and out."""

    def __init__(self, guard: ConnectionGuard, inner: web.RequestHandler) -> None:
        self._guard = guard
        self._inner = inner
        self.closing = False
        self._refused = False
        self._received = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._guard.admit(self):
            self._refused = True
            if isinstance(transport, asyncio.WriteTransport):
                transport.write(_REFUSAL)
            transport.close()
            return
        self._inner.connection_made(transport)

    @property
    def waiting(self) -> bool:
        """Whether the connection waits for a request (or for the rest of one): it has sent
        nothing yet, or aiohttp's handler waits, its own test before its keep-alive timeout
        closes a connection."""
        waiter = getattr(self._inner, "_waiter", None)
        return not self._received or (waiter is not None and not waiter.done())

    def close(self) -> None:
        self.closing = True
        self._inner.force_close()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        self._received = True
        self._guard.touch(self)
        self._inner.data_received(data)

    def eof_received(self) -> None:
        if not self._refused:
            self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.forget(self)
        if not self._refused:
            self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class Listener:
    """The exporter's listening socket(s) for an aiohttp runner."""

    def __init__(
        self,
        runner: web.AppRunner,
        host: str,
        port: int,
        *,
        max_connections: int,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if runner.server is None:
            raise RuntimeError("call runner.setup() first")
        cap, self._backlog = connection_cap(max_connections)
        self.guard = ConnectionGuard(runner.server, cap)
        self._host, self._port, self._ssl = host, port, ssl_context
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        install_log_filter()
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            self.guard, self._host, self._port, ssl=self._ssl, backlog=self._backlog
        )

    @property
    def addresses(self) -> list[Any]:
        return [s.getsockname() for s in self._server.sockets] if self._server else []

    def close(self) -> None:
        """Stop accepting; the runner's clean-up then closes the open connections."""
        if self._server is not None:
            self._server.close()


class ServerLogFilter(logging.Filter):
    """For aiohttp's and asyncio's error records: one line per kind per interval, no traceback
    for what a client or the system caused, and the count of the lines held back."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._limiter = LogThrottle(interval, clock)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        exc = record.exc_info[1] if record.exc_info else None
        first_line = str(record.msg).split("\n", 1)[0][:200]
        if isinstance(exc, HttpProcessingError):
            # A client's malformed or oversized request: aiohttp answered it with a 400.
            _one_line(record, "bad request from a client", _reason(exc))
            record.levelno, record.levelname = logging.INFO, "INFO"
            if not logging.getLogger().isEnabledFor(logging.INFO):
                return False
        elif isinstance(exc, OSError):
            _one_line(record, first_line, _reason(exc))
        held = self._limiter.allow((record.name, first_line, type(exc).__name__))
        if held is None:
            return False
        if held:
            record.repeated = held
        return True


def _one_line(record: logging.LogRecord, message: str, reason: str) -> None:
    record.msg, record.args = f"{message}: {reason}", ()
    record.exc_info, record.exc_text = None, None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, HttpProcessingError):
        # Not its message: that quotes the request's bytes, which may hold a credential.
        return f"{exc.code} {type(exc).__name__}"
    return (str(exc) or type(exc).__name__).split("\n", 1)[0][:200]


_FILTER = ServerLogFilter()


def install_log_filter() -> None:
    """Put `ServerLogFilter` on the loggers aiohttp's server and asyncio's loop write to."""
    for name in ("aiohttp.server", "asyncio", "aiohttp.web"):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
