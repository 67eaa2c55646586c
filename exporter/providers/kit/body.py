"""Reading a reply body with a size cap, streamed, so one huge reply cannot exhaust memory.

One DescribeJobMetrics reply of 30 MB took the process from 53 to 825 MiB (parsed JSON costs
~25 bytes per byte of text), and 22 replies of 300 MB took it past 6.4 GiB: a reply is refused
at once when its Content-Length is over the cap, and otherwise read in chunks and abandoned as
soon as it passes the cap (the connection is closed, not drained).
"""

from __future__ import annotations

from typing import Protocol

CHUNK = 64 * 1024
TOO_LARGE = "too_large"


class ReplyTooLarge(Exception):
    """A reply over the cap: the call fails with code `too_large` and is not retried (it would
    be as large again)."""

    def __init__(self, limit: int, declared: int | None = None) -> None:
        size = f"declares {declared} bytes" if declared is not None else "is longer"
        super().__init__(f"reply {size}, over the {limit}-byte limit (limits.max_reply_bytes)")
        self.limit = limit
        self.declared = declared


class _Content(Protocol):
    async def readany(self) -> bytes: ...


class Response(Protocol):
    """What `read_capped` needs of an `aiohttp.ClientResponse`."""

    @property
    def content_length(self) -> int | None: ...

    @property
    def content(self) -> _Content: ...

    def close(self) -> None: ...


async def read_capped(response: Response, limit: int) -> bytes:
    """The whole body, or `ReplyTooLarge` once it declares or reaches more than `limit` bytes
    (decompressed bytes: aiohttp inflates before we read)."""
    declared = response.content_length
    if declared is not None and declared > limit:
        response.close()
        raise ReplyTooLarge(limit, declared)
    chunks: list[bytes] = []
    size = 0
    while chunk := await response.content.readany():
        size += len(chunk)
        if size > limit:
            response.close()
            raise ReplyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
