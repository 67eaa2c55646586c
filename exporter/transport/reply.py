"""Reading a reply: the body under a size cap, then its JSON, where any failure is `InvalidReply`.

Parsed JSON costs about 25 bytes per byte of text, so one huge reply could exhaust memory: a
reply declaring more than the cap is refused at once, and any other is streamed in chunks and
abandoned (the connection closed, not drained) as soon as it passes the cap.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pydantic_core

_BOM = "\ufeff"
# `json.loads(..., strict=False)` would build a decoder per reply.
_DECODER = json.JSONDecoder(strict=False)
TOO_LARGE = "too_large"


class ReplyTooLarge(Exception):
    """A reply over the cap: the call fails with code `too_large` and is not retried (it would
    be as large again)."""

    def __init__(self, limit: int, declared: int | None = None) -> None:
        size = f"declares {declared} bytes" if declared is not None else "is longer"
        super().__init__(f"reply {size}, over the {limit}-byte limit (limits.max_reply_bytes)")


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body of an aiohttp response (the backfill's remote write; the provider
    transport reads its own, `exporter.transport.connection`), or `ReplyTooLarge` once it
    declares or reaches more than `limit` bytes (decompressed bytes: aiohttp inflates before
    we read)."""
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


class InvalidReply(ValueError):
    """Raised by a `parse` callback for a reply whose body cannot be used: the attempt failed,
    counted as code `error`."""


def decode_json(body: bytes | str, *, error: type[InvalidReply] = InvalidReply) -> Any:
    """The JSON value of `body`; `error` for any exception (RecursionError too) decoding it.

    Text is decoded as UTF-8 with `surrogateescape`: an invalid byte in a name becomes a lone
    surrogate that the label cleaner (`kit.labels.label`) makes valid, instead of refusing the
    reply. Control characters inside strings are accepted (`strict=False`): a raw tab in a name
    is an odd name, not a reason to drop the reply.

    Bytes are parsed first by pydantic-core's parser, twice as fast: it accepts a subset of
    what `json` accepts (no BOM, invalid UTF-8, lone surrogate escapes, raw control characters
    or nesting past 200) and gives the same value; anything it refuses goes through `json`.
    """
    if not isinstance(body, str):
        try:
            return pydantic_core.from_json(body)
        except Exception:  # ValueError, MemoryError, ...: `json` decides
            pass
    try:
        text = body if isinstance(body, str) else bytes(body).decode("utf-8", "surrogateescape")
        return _DECODER.decode(text.removeprefix(_BOM))
    except Exception as exc:  # RecursionError, ValueError, MemoryError, ...: all the same here
        raise error(f"not JSON: {exc.__class__.__name__}") from None
