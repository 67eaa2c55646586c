"""What the scrape-path benchmarks measure with: wrk runs and their parse, fetches with either
encoding, a process's CPU and memory from /proc, and the servers they drive (bench/serve.py,
node_exporter, any command on a free port), each stopped on the way out.

They sit apart from bench/scrape.py's report and command line because bench/churn.py,
bench/polling.py and bench/scale.py measure with them too.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.ports import start_on_free_port

REPO = Path(__file__).resolve().parent.parent
WRK = "/usr/bin/wrk"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
ACCEPT = "text/plain;version=0.0.4"


@dataclass(frozen=True)
class WrkResult:
    p50_ms: float
    p99_ms: float
    requests_per_s: float
    errors: int


_UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _ms(text: str) -> float:
    match = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text)
    if match is None:
        raise ValueError(f"unexpected wrk latency {text!r}")
    return float(match[1]) * _UNITS_MS[match[2]]


def parse_wrk(output: str) -> WrkResult:
    percentiles = dict(re.findall(r"^\s+(\d+)%\s+(\S+)\s*$", output, re.MULTILINE))
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.MULTILINE)
    if "50" not in percentiles or "99" not in percentiles or rate is None:
        raise ValueError(f"cannot parse wrk output:\n{output}")
    errors = 0
    socket_errors = re.search(r"Socket errors: (.*)$", output, re.MULTILINE)
    if socket_errors:
        errors += sum(int(n) for n in re.findall(r"\d+", socket_errors[1]))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    if non_2xx:
        errors += int(non_2xx[1])
    return WrkResult(_ms(percentiles["50"]), _ms(percentiles["99"]), float(rate[1]), errors)


PACE_SCRIPT = Path(__file__).with_name("pace.lua")


def add_pace_ms(parser: argparse.ArgumentParser) -> None:
    """`--pace-ms`, what `run_wrk` reads as `args.pace_ms`."""
    parser.add_argument(
        "--pace-ms",
        type=int,
        default=0,
        help="ms each wrk connection waits before a request (smoke runs'; 0: none, as fast as "
        "the server answers)",
    )


def run_wrk(url: str, encoding: str, duration: int, args: argparse.Namespace) -> WrkResult:
    """wrk's figures for `url`: `args.threads` threads, `args.connections` connections, each
    sending its next request as soon as a reply is in; or, with `args.pace_ms` (smoke runs,
    whose figures no one reads), that many ms after it (bench/pace.lua), a few requests a
    second instead of all the server can answer."""
    command = [
        WRK,
        f"-t{args.threads}",
        f"-c{args.connections}",
        f"-d{duration}s",
        f"--timeout={args.timeout}s",
        "--latency",
        "-H",
        f"Accept: {ACCEPT}",
    ]
    if encoding == "gzip":
        command += ["-H", "Accept-Encoding: gzip"]
    pace = args.pace_ms
    script = ["-s", str(PACE_SCRIPT), url, "--", str(pace)] if pace else [url]
    done = subprocess.run(
        [*command, *script],
        capture_output=True,
        text=True,
        check=True,
        timeout=duration + args.timeout + 30,
    )
    return parse_wrk(done.stdout)


def fetch(url: str, encoding: str, accept: str = ACCEPT) -> bytes:
    headers = {"Accept": accept}
    if encoding == "gzip":
        headers["Accept-Encoding"] = "gzip"
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as r:
        body: bytes = r.read()
        return body


def run_duration(url: str, encoding: str, args: argparse.Namespace) -> int:
    """`--duration`, or longer when a server is too slow for `--min-rounds` rounds of requests.

    wrk only counts replies that arrive within its run: node_exporter needs about a second of
    CPU per scrape at 100k series, so 32 concurrent scrapes take about a minute. A paced run
    (`args.pace_ms`) also waits the pace before each round.
    """
    single = min(_timed_fetch(url, encoding) for _ in range(2))
    # Concurrent scrapes of node_exporter cost about as much as serial ones (its GC), so no
    # credit for the second core.
    round_s = args.connections * single + args.pace_ms / 1000
    needed: int = math.ceil(args.min_rounds * round_s)
    return max(int(args.duration), needed)


def _timed_fetch(url: str, encoding: str) -> float:
    started = time.monotonic()
    fetch(url, encoding)
    return time.monotonic() - started


def cpu_seconds(pid: int) -> float:
    return sum(cpu_split(pid))


def cpu_split(pid: int, thread: int | None = None) -> tuple[float, float]:
    """User and system CPU seconds of `pid` (/proc/PID/stat), or of its `thread` alone."""
    stat = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    fields = Path(stat).read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def blocks(pid: int) -> int:
    """How often `pid`'s main thread has blocked: its voluntary context switches
    (/proc/PID/task/PID/status). A loop waking from idle costs CPU each time (bench/README.md,
    issue 38), so the count per request explains part of that CPU."""
    status = Path(f"/proc/{pid}/task/{pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("voluntary_ctxt_switches"))
    return int(line.split()[1])


def scrape_cpu_ms(url: str, pid: int, encoding: str, times: int) -> float:
    """The server's CPU ms per scrape of `url`, over `times` scrapes one after another (the
    text 0.0.4 rendering; the server idle before)."""
    before = cpu_seconds(pid)
    for _ in range(times):
        fetch(url, encoding)
    return (cpu_seconds(pid) - before) / times * 1000


def wait_idle(pid: int, seconds: float = 240) -> None:
    """Until `pid` stops using CPU: a server keeps answering the requests wrk abandoned at the
    end of its run (node_exporter for up to a minute), which would load the next run."""
    deadline = time.monotonic() + seconds
    before = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - before < 0.02:
            return
        before = now


def wait_http(url: str, process: subprocess.Popen[str], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


@contextlib.contextmanager
def stopping(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def our_exporter(series: int, *flags: str) -> Iterator[tuple[str, subprocess.Popen[str], int]]:
    """(url, process, series) of bench/serve.py filled with `series` synthetic series."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.serve", "--series", str(series), *flags],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    with stopping(process):
        assert process.stdout is not None
        # The app logs to stdout too; its "listening" line is ours.
        for _ in range(100):
            line = process.stdout.readline().split()
            if not line or line[0] == "listening":
                break
        if line[:1] != ["listening"]:
            raise RuntimeError("bench.serve did not start")
        yield f"http://127.0.0.1:{line[1]}/metrics", process, int(line[2])


def repoll(process: subprocess.Popen[str]) -> None:
    """Have bench.serve poll every target again, and wait until it has."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("poll\n")
    process.stdin.flush()
    for _ in range(1000):
        if process.stdout.readline().strip() == "polled":
            return
    raise RuntimeError("bench.serve did not poll")


def keeper_round(process: subprocess.Popen[str]) -> tuple[float, int, float]:
    """Have bench.serve run its heap keeper's round now: (its pause in ms, objects found, its
    CPU ms: the pause is longer on a loaded machine, the CPU time is the walk's own)."""
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("settle\n")
    process.stdin.flush()
    for _ in range(1000):
        reply = process.stdout.readline().split()
        if reply[:1] == ["settled"]:
            return float(reply[1]), int(reply[2]), float(reply[3])
    raise RuntimeError("bench.serve did not settle")


@contextlib.contextmanager
def node_exporter(text: bytes) -> Iterator[tuple[str, int]]:
    with tempfile.TemporaryDirectory(prefix="bench-textfile-") as directory:
        Path(directory, "bench.prom").write_bytes(text)
        command = [
            NODE_EXPORTER,
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={directory}",
        ]
        with serving(lambda port: [*command, f"--web.listen-address=127.0.0.1:{port}"]) as found:
            yield found


@contextlib.contextmanager
def serving(command_for: Callable[[int], list[str]]) -> Iterator[tuple[str, int]]:
    """(url of /metrics, pid) of a server started with `command_for(port)` on a free port
    (`bench.ports.start_on_free_port`: again on another if its first was taken)."""
    process, port = start_on_free_port(
        lambda port: subprocess.Popen(
            command_for(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True
        )
    )
    with stopping(process):
        url = f"http://127.0.0.1:{port}/metrics"
        wait_http(url, process)
        yield url, process.pid


def met(ok: bool) -> str:
    """How a figure line says whether its goal is met."""
    return "met" if ok else "MISSED"
