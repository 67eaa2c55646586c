"""Ports for the servers that benchmarks and tests start.

A port found free and handed to a server later can be taken in between: the suite runs in
parallel, and every test that starts a server looks for one at the same moments. A server told
to listen on port 0 binds one itself, and `bound_port` reads which from /proc (its sockets or
a descendant's, as when a shell runs it). `free_port` is for the servers that cannot take port
0 (nginx) or must keep one port across restarts (the soak's exporter); `start_on_free_port`
starts such a server again on another port when its first was taken.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

P = TypeVar("P", bound="subprocess.Popen[Any]")

# /proc/net/tcp's state of a listening socket.
_LISTEN = "0A"


def free_port() -> int:
    """A port free on 127.0.0.1 now; another process may take it before the caller binds it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            tasks = list(Path(f"/proc/{current}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            with contextlib.suppress(OSError):
                queue.extend(int(c) for c in (task / "children").read_text().split())
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def listening_ports(pid: int) -> list[int]:
    """The TCP ports that `pid` or a descendant of it listens on, in order."""
    inodes = set[str]().union(*map(_socket_inodes, _tree(pid)))
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == _LISTEN and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def _listening(process: subprocess.Popen[Any], timeout: float, port: int | None) -> list[int]:
    """The ports `process` (or a descendant) listens on, once they include `port` (once there
    is any: None); [] if it exits first; RuntimeError after `timeout` seconds of neither."""
    deadline = time.monotonic() + timeout
    while True:
        ports = listening_ports(process.pid)
        if port in ports if port is not None else ports:
            return ports
        if process.poll() is not None:
            return []
        if time.monotonic() > deadline:
            raise RuntimeError(f"{process.args!r} did not listen in {timeout:g} s")
        time.sleep(0.05)


def bound_port(process: subprocess.Popen[Any], timeout: float = 60.0) -> int:
    """The port `process` (or a descendant), told to listen on port 0, bound; RuntimeError if
    it exits or binds none within `timeout` seconds, or binds more than one."""
    ports = _listening(process, timeout, None)
    if not ports:
        raise RuntimeError(f"{process.args!r} exited ({process.returncode}) before listening")
    if len(ports) > 1:
        raise RuntimeError(f"{process.args!r} listens on {ports}, not on one port")
    return ports[0]


def start_on_free_port(
    start: Callable[[int], P], attempts: int = 3, timeout: float = 30.0
) -> tuple[P, int]:
    """`start(port)` on a free port, and the port, once it listens there; started again on
    another port (up to `attempts` times) if it exits first, as a server whose port was taken
    does."""
    for _ in range(attempts):
        port = free_port()
        process = start(port)
        try:
            if _listening(process, timeout, port):
                return process, port
        except RuntimeError:
            process.kill()
            process.wait()
            raise
    raise RuntimeError(f"{process.args!r} exited ({process.returncode}) on {attempts} free ports")
