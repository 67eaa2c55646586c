"""A TCP tap in front of a simulator: what reaches the wire, counted at the socket.

The simulator's request log sees requests; a connection the exporter opened and closed without
a request (a call dropped after its connection was made) never reaches it. The tap accepts
every connection itself, notes when (its `clock`), and pipes the bytes both ways to the
upstream, so a test or a benchmark counts connections as the provider's load balancer would.
It notes each request too, as its request line goes by (HTTP/1.1: `... HTTP/1.1` and CRLF,
which no header or JSON body holds), so several taps in front of one simulator tell their
clients' requests apart.
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
        # When each connection was accepted, and each request line went by, in order.
        self.accepted: list[float] = []
        self.requests: list[float] = []
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
            await asyncio.gather(
                _pipe(reader, up_writer, self._saw), _pipe(up_reader, writer, None)
            )
        finally:
            self._writers -= {writer, up_writer}

    def _saw(self, requests: int) -> None:
        now = self.clock()
        self.requests.extend([now] * requests)

    def close(self) -> None:
        """Close every connection still open, both ways."""
        for writer in list(self._writers):
            writer.close()


REQUEST_LINE_END = b" HTTP/1.1\r\n"


async def _pipe(
    source: asyncio.StreamReader,
    sink: asyncio.StreamWriter,
    requests: Callable[[int], None] | None,
) -> None:
    """Copy until either side closes, then close the sink (a half-closed peer ends both);
    tell `requests` how many request lines each chunk completed."""
    tail = b""
    try:
        while chunk := await source.read(CHUNK):
            if requests is not None:
                seen = tail + chunk
                if count := seen.count(REQUEST_LINE_END):
                    requests(count)
                tail = seen[-(len(REQUEST_LINE_END) - 1) :]
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
