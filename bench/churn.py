"""The scrape path while the pool changes, against nginx serving the same bytes pre-gzipped.

`bench/serve.py --churn N` gives N jobs new values every second (merged and swapped as the
work queue's checkpoints do), so the exporter keeps rendering while wrk scrapes it, with gzip
(and, with `--encodings gzip,identity`, without). nginx (one worker, `access_log off`) serves
the same exposition from files, gzipped and as it is: the floor, what sending those bytes over
loopback costs. Each repeat runs both, in turn, at 1 connection (one Prometheus) and at 32;
medians over the repeats, and their ratios. After each of its runs the exporter says what its
loop waited for (`bench/pauses.py`): lags put down to the machine not running it, to the loop
or to another thread, and its cyclic collections, on CPU time, which a shared machine does not
blur as it does the wall-clock p99:

    python -m bench.churn                        # 100k series, 4 jobs/s, gzip, 10 s x 3 repeats
    python -m bench.churn --encodings gzip,identity --connections 1    # issue 38's goals
    python -m bench.churn --series 10000 --duration 3 --repeat 1    # a small run
    python -m bench.churn --series 2000 --duration 1 --repeat 1 --pace-ms 200   # tests/bench

Goals (issues 20 and 38): 1 connection p50 <= 1.5 x the floor's and p99 <= 3 x the floor's
p99, either encoding; 32 connections p50 <= 2 x the floor's. Every figure is a line starting
`churn`, `pauses` or `ratio`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.measure import (
    ACCEPT,
    WRK,
    WrkResult,
    add_pace_ms,
    fetch,
    met,
    our_exporter,
    run_wrk,
    serving,
    wait_idle,
)

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SERVERS = ("ours", "nginx")
# (connections, wrk threads) and the goals on (p50, p99) as multiples of the floor's.
LOADS = {1: (1, (1.5, 3.0)), 32: (2, (2.0, None))}

_NGINX_CONF = """daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location = /metrics {{
            default_type "text/plain; version=0.0.4; charset=utf-8";
            add_header Content-Encoding gzip;
            alias {dir}/metrics.gz;
        }}
        location = /identity {{
            default_type "text/plain; version=0.0.4; charset=utf-8";
            alias {dir}/metrics;
        }}
    }}
}}
"""


@contextlib.contextmanager
def nginx(gzipped: bytes, plain: bytes = b"") -> Iterator[tuple[str, int]]:
    """(url, pid) of an nginx serving `gzipped` as a gzip reply at /metrics, and `plain` as
    it is at /identity."""
    with tempfile.TemporaryDirectory(prefix="bench-nginx-") as directory:
        os.chmod(directory, 0o755)  # its workers drop to nobody
        Path(directory, "metrics.gz").write_bytes(gzipped)
        Path(directory, "metrics").write_bytes(plain)
        conf = Path(directory, "nginx.conf")
        command = [NGINX, "-p", directory, "-c", str(conf), "-e", f"{directory}/error.log"]

        def on(port: int) -> list[str]:
            conf.write_text(_NGINX_CONF.format(dir=directory, port=port))
            return command

        with serving(on) as found:
            yield found


def run(args: argparse.Namespace) -> None:
    flags = ("--churn", str(args.churn))
    loads = {c: LOADS[c] for c in args.connections}
    with our_exporter(args.series, *flags) as (ours_url, server, count):
        gzipped, plain = fetch(ours_url, "gzip"), fetch(ours_url, "identity")
        with nginx(gzipped, plain) as (nginx_url, nginx_pid):
            urls = {
                ("ours", "gzip"): ours_url,
                ("ours", "identity"): ours_url,
                ("nginx", "gzip"): nginx_url,
                ("nginx", "identity"): nginx_url.replace("/metrics", "/identity"),
            }
            pids = {"ours": server.pid, "nginx": nginx_pid}
            results: dict[tuple[str, str, int], list[WrkResult]] = {}
            waits: dict[tuple[str, int], list[str]] = {}
            for repeat in range(args.repeat):
                for encoding in args.encodings:
                    for connections, (threads, _) in loads.items():
                        order = SERVERS if repeat % 2 == 0 else SERVERS[::-1]
                        for name in order:
                            load = argparse.Namespace(
                                threads=threads,
                                connections=connections,
                                timeout=args.timeout,
                                pace_ms=args.pace_ms,
                            )
                            url = urls[(name, encoding)]
                            if name == "ours":
                                pauses(server)  # counted afresh from here
                            result = run_wrk(url, encoding, args.duration, load)
                            if name == "ours":
                                waits.setdefault((encoding, connections), []).append(pauses(server))
                            wait_idle(pids[name], 30)
                            results.setdefault((name, encoding, connections), []).append(result)
    for encoding in args.encodings:
        for connections, (_, goals) in loads.items():
            report(args, count, encoding, connections, goals, results)
            for repeat, line in enumerate(waits[(encoding, connections)]):
                fields = line.removeprefix("pauses").strip()
                print(
                    f"pauses  series={count} encoding={encoding} connections={connections} "
                    f"repeat={repeat} {fields}",
                    flush=True,
                )


def pauses(server: subprocess.Popen[str]) -> str:
    """bench.serve's `pauses` line: its loop's lags and collections since the last one."""
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("pauses\n")
    server.stdin.flush()
    for _ in range(1000):
        line = server.stdout.readline()
        if line.startswith("pauses"):
            return line
    raise RuntimeError("bench.serve did not say its pauses")


def report(
    args: argparse.Namespace,
    count: int,
    encoding: str,
    connections: int,
    goals: tuple[float, float | None],
    results: dict[tuple[str, str, int], list[WrkResult]],
) -> None:
    medians = {}
    for name in SERVERS:
        runs = results[(name, encoding, connections)]
        m = medians[name] = WrkResult(
            statistics.median(r.p50_ms for r in runs),
            statistics.median(r.p99_ms for r in runs),
            statistics.median(r.requests_per_s for r in runs),
            sum(r.errors for r in runs),
        )
        spread = " ".join(f"{r.p50_ms:.2f}/{r.p99_ms:.2f}" for r in runs)
        print(
            f"churn   series={count} jobs_per_s={args.churn} encoding={encoding} "
            f"connections={connections} server={name} p50_ms={m.p50_ms:.2f} "
            f"p99_ms={m.p99_ms:.2f} req_per_s={m.requests_per_s:.1f} errors={m.errors} "
            f"runs(p50/p99)={spread}",
            flush=True,
        )
    ours, floor = medians["ours"], medians["nginx"]
    p50, p99 = ours.p50_ms / floor.p50_ms, ours.p99_ms / floor.p99_ms
    p50_goal, p99_goal = goals
    print(
        f"ratio   series={count} encoding={encoding} connections={connections} ours/nginx "
        f"p50={p50:.2f} (goal <= {p50_goal}: {met(p50 <= p50_goal)}) "
        f"p99={p99:.2f}" + (f" (goal <= {p99_goal}: {met(p99 <= p99_goal)})" if p99_goal else ""),
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--churn", type=int, default=4, help="jobs changed per second")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=30, help="wrk request timeout, s")
    parser.add_argument("--encodings", default="gzip", help="comma-separated: gzip,identity")
    parser.add_argument("--connections", default="1,32", help="wrk connections, comma-separated")
    add_pace_ms(parser)
    args = parser.parse_args(argv)
    args.encodings = [e for e in args.encodings.split(",") if e]
    args.connections = [int(c) for c in args.connections.split(",") if c]
    if set(args.encodings) - {"gzip", "identity"} or set(args.connections) - set(LOADS):
        parser.error("unknown encodings or connections")
    missing = [tool for tool in (WRK, NGINX) if not shutil.which(tool)]
    if missing:
        print(f"missing {', '.join(missing)}", file=sys.stderr)
        return 2
    print(
        f"info    cores={os.cpu_count()} loadavg_start={os.getloadavg()[0]:.2f} "
        f"accept={ACCEPT!r} encodings={','.join(args.encodings)}",
        flush=True,
    )
    run(args)
    print(f"info    loadavg_end={os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
