"""bench/ports.py: the port a server bound itself, read from /proc, and a server started again
when its free port was taken before it could bind it."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from bench.ports import bound_port, listening_ports, start_on_free_port


def http_server(port: int) -> list[str]:
    return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]


def run(command: list[str]) -> subprocess.Popen[bytes]:
    """`command` in a session of its own, its output dropped."""
    quiet = subprocess.DEVNULL
    return subprocess.Popen(command, stdout=quiet, stderr=quiet, start_new_session=True)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes to stop, each with its session (a shell's children too)."""
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_the_port_a_grandchild_bound_itself(started: list[subprocess.Popen[bytes]]) -> None:
    # The shell stays (a command follows), so the server is its child.
    command = " ".join(http_server(0)) + "; true"
    shell = run(["sh", "-c", command])
    started.append(shell)
    port = bound_port(shell, timeout=30)
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    assert listening_ports(shell.pid) == [port]


def test_a_server_that_exits_first_is_named() -> None:
    process = run([sys.executable, "-c", "pass"])
    process.wait()
    with pytest.raises(RuntimeError, match="exited"):
        bound_port(process, timeout=30)


def test_a_server_whose_port_was_taken_starts_again_on_another(
    started: list[subprocess.Popen[bytes]],
) -> None:
    ports: list[int] = []
    taker = socket.socket()

    def start(port: int) -> subprocess.Popen[bytes]:
        if not ports:
            # Another process takes the port between the search and the server's bind.
            taker.bind(("127.0.0.1", port))
            taker.listen()
        ports.append(port)
        process = run(http_server(port))
        started.append(process)
        return process

    with taker:
        process, port = start_on_free_port(start)
        assert len(ports) == 2 and port == ports[1] != ports[0]
        assert started[0].poll() is not None
        assert listening_ports(process.pid) == [port]
