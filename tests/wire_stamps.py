"""A TCP relay that notes when each request reached the machine's kernel, not when a process
got round to reading it: on a loaded machine a reader runs late and reads several requests at
once, and a count per second of what it saw would be the scheduler's, not the sender's.

Each connection accepted is piped both ways to `upstream` by two threads; the inbound socket
asks Linux for receive timestamps (SO_TIMESTAMPNS), and each read that starts a request line
(`GET ` or `POST `: HTTP/1.1 without pipelining, a request per write) notes its timestamp.

`relay_process` runs the relay in a process of its own, as a hop of the network would be: its
two threads a connection do not share the sender's GIL, so on a loaded machine they do not
hold the sender back between the moment its budget lets a request go and its write.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import socket
import struct
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection

# <asm-generic/socket.h>: SO_TIMESTAMPNS (Python's socket module does not name it).
SO_TIMESTAMPNS = 35
_STARTS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"HEAD ")


class StampingRelay:
    """`url` relays to `upstream`; `stamps` are the kernel's receive times (unix seconds) of
    the requests that went through."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.stamps: list[float] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        # On the listener, so that a connection's first request is stamped too: it may reach
        # the kernel before accept() returns.
        self._listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def __enter__(self) -> StampingRelay:
        self._stamps_on()
        self._spawn(self._accept)
        return self

    def _stamps_on(self) -> None:
        """Return once the kernel stamps what arrives: Linux turns receive timestamps on for
        the machine a moment after the first socket asks (a deferred switch), and a request
        arriving before that has none."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.create_connection(self._listener.getsockname()) as probe:
                accepted, _ = self._listener.accept()
                with accepted:
                    probe.sendall(b"x")
                    _, ancillary, _, _ = accepted.recvmsg(16, socket.CMSG_SPACE(16))
            if ancillary:
                return
            time.sleep(0.01)
        raise AssertionError("the kernel gave no receive timestamps")

    def __exit__(self, *_: object) -> None:
        # shutdown, not close alone, wakes a thread blocked in accept() or recv() on Linux.
        for sock in [self._listener, *self._sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in list(self._threads):
            thread.join(5)

    def _spawn(self, target: object, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self._listener.accept()
            except OSError:
                return
            outbound = socket.create_connection(self.upstream)
            self._sockets += [inbound, outbound]
            self._spawn(self._in, inbound, outbound)
            self._spawn(self._out, outbound, inbound)

    def _in(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data, ancillary, _, _ = source.recvmsg(1 << 16, socket.CMSG_SPACE(16))
                if not data:
                    break
                if data.startswith(_STARTS):
                    self._note(ancillary)
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            return

    def taken(self) -> list[float]:
        """The stamps so far, in order."""
        with self._lock:
            return sorted(self.stamps)

    def _note(self, ancillary: list[tuple[int, int, bytes]]) -> None:
        stamps = [
            struct.unpack("qq", payload[:16])
            for level, kind, payload in ancillary
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS
        ]
        assert stamps, "the kernel gave no receive timestamp"
        seconds, nanoseconds = stamps[0]
        with self._lock:
            self.stamps.append(seconds + nanoseconds / 1e9)

    @staticmethod
    def _out(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(1 << 16):
                sink.sendall(data)
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            return


@contextlib.contextmanager
def relay_process(upstream: tuple[str, int]) -> Iterator[tuple[str, list[float]]]:
    """A `StampingRelay` to `upstream` in a child process: (its url, its stamps), the stamps
    filled in when the block ends."""
    spawn = multiprocessing.get_context("spawn")
    ours, theirs = spawn.Pipe()
    child = spawn.Process(target=_relay_main, args=(upstream, theirs), daemon=True)
    child.start()
    theirs.close()
    try:
        if not ours.poll(30):
            raise AssertionError("the relay process did not start")
        url: str = ours.recv()
        stamps: list[float] = []
        yield url, stamps
        ours.send("stop")
        if not ours.poll(30):
            raise AssertionError("the relay process sent no stamps")
        stamps += ours.recv()
        child.join(10)
    finally:
        if child.is_alive():  # the block raised, or the relay hung
            child.kill()
            child.join(10)
        ours.close()


def _relay_main(upstream: tuple[str, int], pipe: Connection) -> None:
    with StampingRelay(upstream) as relay:
        pipe.send(relay.url)
        pipe.recv()
    pipe.send(relay.taken())
