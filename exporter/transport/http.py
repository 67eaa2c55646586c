"""The aiohttp `Transport`: one session per target, its body read under the cap.

The connector allows `max_concurrency` connections, as many as the target's workers, so no
request waits for a connection after it took its budget slot.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp

from exporter.configkit import Limits
from exporter.transport.iface import ApiResponse, PreparedRequest
from exporter.transport.reply import read_capped


class HttpTransport:
    def __init__(
        self, limits: Limits, on_write: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """`on_write` runs as each request is written (aiohttp's headers-sent hook)."""
        self.limits = limits
        self._on_write = on_write
        self._session: aiohttp.ClientSession | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            limit = self.limits.max_concurrency
            traces = None
            if self._on_write is not None:
                hook = self._on_write

                async def written(*_: object) -> None:
                    await hook()

                trace = aiohttp.TraceConfig()
                trace.on_request_headers_sent.append(written)
                traces = [trace]
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=limit, limit_per_host=limit),
                trace_configs=traces,
                timeout=aiohttp.ClientTimeout(total=self.limits.timeout),
                raise_for_status=False,
                auto_decompress=True,
            )
        return self._session

    async def send(self, request: PreparedRequest) -> ApiResponse:
        async with self.session.request(
            request.method,
            request.url,
            headers=dict(request.headers),
            data=request.body,
            allow_redirects=False,
        ) as resp:
            body = await read_capped(resp, self.limits.max_reply_bytes)
            return ApiResponse(resp.status, resp.headers, body)

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
