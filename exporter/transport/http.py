"""The aiohttp transport: one session per target, each reply's body read under the cap.

The connector allows `max_concurrency` connections, as many as the client lets attempts run,
so no request waits for a connection. It keeps an idle one KEEPALIVE seconds: a target's calls
are paced over its round, often more than aiohttp's default 15 s apart, and a pool that lets
go of its connections between them opens them again (and shakes hands again, with TLS) several
times a round; most load balancers keep an idle connection 60 s.

A request comes here once the gate admitted it (`exporter.transport.limited`): a call that will
not be sent never takes a connection, new or pooled. `limits.timeout` covers the request from
here until its reply is read.

aiohttp itself sends an idempotent request again, on a new connection, when a pooled one
turns out closed by the server; `resent` is told of each such extra write, which the
provider counts too. Only those methods (aiohttp's `IDEMPOTENT_METHODS`) go through a session
that traces each write: the trace's signals cost every request a dozen awaits and objects, and
a POST (every AIHC read) is never sent twice. Both sessions share one connection pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace

import aiohttp
from aiohttp.client import IDEMPOTENT_METHODS

from exporter.configkit import Limits
from exporter.transport.iface import ApiResponse, PreparedRequest
from exporter.transport.reply import read_capped

KEEPALIVE = 55.0


class _Writes:
    """How often one request was written, and whom to tell of each write after the first."""

    def __init__(self, resent: Callable[[], None]) -> None:
        self.count = 0
        self.resent = resent


async def _headers_sent(_: object, context: SimpleNamespace, __: object) -> None:
    writes: _Writes = context.trace_request_ctx
    writes.count += 1
    if writes.count > 1:
        writes.resent()


class HttpTransport:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._plain: aiohttp.ClientSession | None = None
        self._traced: aiohttp.ClientSession | None = None

    def session(self, method: str) -> aiohttp.ClientSession:
        """The session for `method`: traced if aiohttp may send it twice."""
        if self._plain is None or self._plain.closed:
            limit = self.limits.max_concurrency
            connector = aiohttp.TCPConnector(
                limit=limit, limit_per_host=limit, keepalive_timeout=KEEPALIVE
            )
            trace = aiohttp.TraceConfig()
            trace.on_request_headers_sent.append(_headers_sent)
            self._plain = self._session(connector, owner=True)
            self._traced = self._session(connector, owner=False, trace=trace)
        assert self._traced is not None
        return self._traced if method in IDEMPOTENT_METHODS else self._plain

    def _session(
        self,
        connector: aiohttp.BaseConnector,
        *,
        owner: bool,
        trace: aiohttp.TraceConfig | None = None,
    ) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=connector,
            connector_owner=owner,
            trace_configs=None if trace is None else [trace],
            timeout=aiohttp.ClientTimeout(total=None, connect=self.limits.timeout),
            raise_for_status=False,
            auto_decompress=True,
        )

    async def send(self, request: PreparedRequest, resent: Callable[[], None]) -> ApiResponse:
        """One attempt, admitted already. Raises `ReplyTooLarge`, `TimeoutError` (no reply
        within `timeout`) or `aiohttp.ClientError`; never retries."""
        traced = request.method in IDEMPOTENT_METHODS
        async with (
            asyncio.timeout(self.limits.timeout),
            self.session(request.method).request(
                request.method,
                request.url,
                headers=request.headers,
                data=request.body,
                allow_redirects=False,
                # Only the traced session reads it: none made for a POST.
                trace_request_ctx=_Writes(resent) if traced else None,
            ) as resp,
        ):
            body = await read_capped(resp, self.limits.max_reply_bytes)
            return ApiResponse(resp.status, resp.headers, body)

    async def close(self) -> None:
        for session in (self._traced, self._plain):
            if session is not None and not session.closed:
                await session.close()
        self._plain = self._traced = None
