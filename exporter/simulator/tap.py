"""A TCP tap in front of a simulator: what reaches the wire, counted at the socket.

The simulator's request log sees requests; a connection the exporter opened and closed without
a request (a call dropped after its connection was made) never reaches it. The tap accepts
every connection itself, notes when (its `clock`), and pipes the bytes both ways to the
upstream, so a test or a benchmark counts connections as the provider's load balancer would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

CHUNK = 64 * 1024


class Tap:
    """Counts and times the connections it accepts; `url` is where clients should connect."""

    def __init__(self, upstream: tuple[str, int], clock: Callable[[], float] = time.monotonic):
        self.upstream = upstream
        self.clock = clock
        # When each connection was accepted, in order (bounded by the caller's run).
        self.accepted: list[float] = []
        self.url = ""
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def connections(self) -> int:
        return len(self.accepted)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted.append(self.clock())
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}

    def close(self) -> None:
        """Close every connection still open, both ways."""
        for writer in list(self._writers):
            writer.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until either side closes, then close the sink (a half-closed peer ends both)."""
    try:
        while chunk := await source.read(CHUNK):
            sink.write(chunk)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        sink.close()


@asynccontextmanager
async def tapped(url: str, clock: Callable[[], float] = time.monotonic) -> AsyncIterator[Tap]:
    """A tap on a free loopback port in front of the server at `url` (http://host:port)."""
    host, _, port = url.removeprefix("http://").rstrip("/").rpartition(":")
    tap = Tap((host.strip("[]"), int(port)), clock)
    server = await asyncio.start_server(tap._serve, "127.0.0.1", 0)
    tap.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield tap
    finally:
        server.close()
        tap.close()
        await server.wait_closed()
