"""The scrape path while the pool changes, against nginx serving the same bytes pre-gzipped.

`bench/serve.py --churn N` gives N jobs new values every second (merged and swapped as the
work queue's checkpoints do), so the exporter keeps rendering while wrk scrapes it with gzip.
nginx (one worker, `access_log off`) serves a gzip reply of the same exposition from a file:
the floor, what sending those bytes over loopback costs. Each repeat runs both, in turn, at 1
connection (one Prometheus) and at 32; medians over the repeats, and their ratios:

    python -m bench.churn                        # 100k series, 4 jobs/s, 10 s x 3 repeats
    python -m bench.churn --series 10000 --duration 3 --repeat 1    # a smoke test

Goals (issue 20): 1 connection p50 <= 1.5 x the floor's and p99 <= 3 x the floor's p99;
32 connections p50 <= 2 x the floor's. Every figure is a line starting `churn` or `ratio`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bench.scrape import (
    ACCEPT,
    WRK,
    WrkResult,
    fetch,
    free_port,
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
    }}
}}
"""


@contextlib.contextmanager
def nginx(gzipped: bytes) -> Iterator[tuple[str, int]]:
    """(url, pid) of an nginx serving `gzipped` as a gzip reply."""
    with tempfile.TemporaryDirectory(prefix="bench-nginx-") as directory:
        os.chmod(directory, 0o755)  # its workers drop to nobody
        Path(directory, "metrics.gz").write_bytes(gzipped)
        port = free_port()
        conf = Path(directory, "nginx.conf")
        conf.write_text(_NGINX_CONF.format(dir=directory, port=port))
        command = [NGINX, "-p", directory, "-c", str(conf), "-e", f"{directory}/error.log"]
        with serving(command, port) as found:
            yield found


def run(args: argparse.Namespace) -> None:
    flags = ("--churn", str(args.churn))
    with our_exporter(args.series, *flags) as (ours_url, server, count):
        gzipped = fetch(ours_url, "gzip")
        with nginx(gzipped) as (nginx_url, nginx_pid):
            urls = {"ours": ours_url, "nginx": nginx_url}
            pids = {"ours": server.pid, "nginx": nginx_pid}
            results: dict[tuple[str, int], list[WrkResult]] = {}
            for repeat in range(args.repeat):
                for connections, (threads, _) in LOADS.items():
                    order = SERVERS if repeat % 2 == 0 else SERVERS[::-1]
                    for name in order:
                        load = argparse.Namespace(
                            threads=threads, connections=connections, timeout=args.timeout
                        )
                        result = run_wrk(urls[name], "gzip", args.duration, load)
                        wait_idle(pids[name], 30)
                        results.setdefault((name, connections), []).append(result)
    for connections, (_, goals) in LOADS.items():
        medians = {}
        for name in SERVERS:
            runs = results[(name, connections)]
            m = medians[name] = WrkResult(
                statistics.median(r.p50_ms for r in runs),
                statistics.median(r.p99_ms for r in runs),
                statistics.median(r.requests_per_s for r in runs),
                sum(r.errors for r in runs),
            )
            spread = " ".join(f"{r.p50_ms:.2f}/{r.p99_ms:.2f}" for r in runs)
            print(
                f"churn   series={count} jobs_per_s={args.churn} connections={connections} "
                f"server={name} p50_ms={m.p50_ms:.2f} p99_ms={m.p99_ms:.2f} "
                f"req_per_s={m.requests_per_s:.1f} errors={m.errors} runs(p50/p99)={spread}",
                flush=True,
            )
        ours, floor = medians["ours"], medians["nginx"]
        p50, p99 = ours.p50_ms / floor.p50_ms, ours.p99_ms / floor.p99_ms
        p50_goal, p99_goal = goals
        print(
            f"ratio   series={count} connections={connections} ours/nginx "
            f"p50={p50:.2f} (goal <= {p50_goal}: {_met(p50 <= p50_goal)}) "
            f"p99={p99:.2f}"
            + (f" (goal <= {p99_goal}: {_met(p99 <= p99_goal)})" if p99_goal else ""),
            flush=True,
        )


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--series", type=int, default=100_000)
    parser.add_argument("--churn", type=int, default=4, help="jobs changed per second")
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=int, default=30, help="wrk request timeout, s")
    args = parser.parse_args(argv)
    missing = [tool for tool in (WRK, NGINX) if not shutil.which(tool)]
    if missing:
        print(f"missing {', '.join(missing)}", file=sys.stderr)
        return 2
    print(
        f"info    cores={os.cpu_count()} loadavg_start={os.getloadavg()[0]:.2f} "
        f"accept={ACCEPT!r} encoding=gzip",
        flush=True,
    )
    run(args)
    print(f"info    loadavg_end={os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
