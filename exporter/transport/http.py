"""The aiohttp transport: one session per target, each reply's body read under the cap.

The connector allows `max_concurrency` connections, as many as the client lets attempts run,
so no request waits for a connection. `admit` (the gate) runs in aiohttp's headers-sent hook,
where the provider starts counting; `limits.timeout` then covers the request from that write
until its reply is read, never the wait for the slot before it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace

import aiohttp

from exporter.configkit import Limits
from exporter.transport.iface import ApiResponse, PreparedRequest
from exporter.transport.reply import read_capped


async def _headers_sent(_: object, context: SimpleNamespace, __: object) -> None:
    await context.trace_request_ctx()


class HttpTransport:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            limit = self.limits.max_concurrency
            trace = aiohttp.TraceConfig()
            trace.on_request_headers_sent.append(_headers_sent)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=limit, limit_per_host=limit),
                trace_configs=[trace],
                timeout=aiohttp.ClientTimeout(total=None, connect=self.limits.timeout),
                raise_for_status=False,
                auto_decompress=True,
            )
        return self._session

    async def send(
        self, request: PreparedRequest, admit: Callable[[], Awaitable[None]]
    ) -> ApiResponse:
        """One attempt, `admit` awaited as it is written. Raises what `admit` raises,
        `ReplyTooLarge`, `TimeoutError` (no reply within `timeout` of the write) or
        `aiohttp.ClientError`; never retries."""
        async with asyncio.timeout(None) as timer:

            async def written() -> None:
                # Again for aiohttp's own resend on a dropped keep-alive connection: no clock
                # while it waits for its slot.
                timer.reschedule(None)
                await admit()
                timer.reschedule(asyncio.get_running_loop().time() + self.limits.timeout)

            async with self.session.request(
                request.method,
                request.url,
                headers=dict(request.headers),
                data=request.body,
                allow_redirects=False,
                trace_request_ctx=written,
            ) as resp:
                body = await read_capped(resp, self.limits.max_reply_bytes)
                return ApiResponse(resp.status, resp.headers, body)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
