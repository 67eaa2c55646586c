"""Scrape-path benchmark: the exporter beside node_exporter serving the same text, at 10k/100k.

For each size: build a synthetic pool (bench/synthetic.py) through the real model/merge and
store, serve it from the real aiohttp app (bench/serve.py, its own process), write the exact
exposition it serves to a `.prom` file for Debian's prometheus-node-exporter (textfile
collector only, which re-parses the file on every scrape), then drive each in turn with wrk
(32 connections) for both encodings, asking both for text format 0.0.4
(`Accept: text/plain;version=0.0.4`) and either no `Accept-Encoding` (identity) or
`Accept-Encoding: gzip`. Runs are repeated and medians reported, because the machine is shared.

Also prints the exporter's RSS after it rendered both encodings (and its peak after the load),
and the CPU time per series to build (samples + merge into snapshots) and render (exposition
bytes) one snapshot in this process, median of several runs.

    python -m bench.scrape                 # 10k and 100k, 10 s per wrk run, 3 repeats
    python -m bench.scrape --quick         # 10k only, 8 connections, 3 s, 1 repeat
    python -m bench.scrape --smoke         # 1.2k, 1 s paced runs: every line, no figure (tests)

Every figure is one line starting with `scrape`, `ratio`, `rss` or `cpu`.

What it measures with (wrk, fetches, /proc figures, the servers it starts) is in bench/measure.py.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import statistics
import sys
import time
import zlib
from dataclasses import dataclass

from bench import synthetic
from bench.measure import (
    ACCEPT,
    NODE_EXPORTER,
    WRK,
    WrkResult,
    add_pace_ms,
    fetch,
    keeper_round,
    met,
    node_exporter,
    our_exporter,
    repoll,
    run_duration,
    run_wrk,
    scrape_cpu_ms,
    vm_kib,
    wait_idle,
)
from exporter.collector import SnapshotCollector, negotiate
from exporter.heap import tune_runtime
from exporter.model import TargetSnapshot, Update, merge
from exporter.store import SnapshotStore

OPENMETRICS = "application/openmetrics-text;version=1.0.0"
ENCODINGS = ("identity", "gzip")
# Scrapes whose server CPU is averaged, per encoding: /proc counts 10 ms ticks.
SCRAPES_FOR_CPU = {"identity": 10, "gzip": 50}
SERVERS = ("ours", "node_exporter")
# Issue 38: the settled RSS after polls, by --series.
SETTLED_GOALS_MIB = {100_000: 110, 400_000: 260}


@dataclass(frozen=True)
class CpuFigures:
    series: int
    build_us: float
    render_us: float
    render_openmetrics_us: float
    gzip_us: float


def cpu_per_series(series: int, runs: int) -> CpuFigures:
    """CPU µs per series, medians of `runs` in this process: build (provider samples, merge
    into snapshots, swap into the store), render (text 0.0.4 bytes; OpenMetrics beside it)
    and the gzip of the text that the exposition caches; each happens once per poll, never
    per scrape."""
    heap = tune_runtime()  # the exporter's own setting, as in exporter.cli.serve
    text, openmetrics = negotiate(ACCEPT), negotiate(OPENMETRICS)
    targets = synthetic.plan(series)
    figures: list[tuple[float, ...]] = []
    count = 0
    for _ in range(runs):
        heap.collect()
        started = time.process_time()
        snapshots = [
            merge(
                TargetSnapshot.empty(t.provider, t.target),
                Update.of(synthetic.job_parts(t)),
                synthetic.NOW,
                synthetic.BOUNDS,
            ).snapshot
            for t in targets
        ]
        store = SnapshotStore()
        for snapshot in snapshots:
            store.swap(snapshot)
        built = time.process_time()
        collector = SnapshotCollector(store.view)
        marks = [time.process_time()]
        body = collector.render(store.view(), text.encoder, text.content_type)
        marks.append(time.process_time())
        collector.render(store.view(), openmetrics.encoder, openmetrics.content_type)
        marks.append(time.process_time())
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
        compressor.compress(body)
        compressor.flush(zlib.Z_SYNC_FLUSH)
        marks.append(time.process_time())
        count = sum(s.series for s in snapshots)
        spans = [built - started] + [b - a for a, b in itertools.pairwise(marks)]
        figures.append(tuple(span / count * 1e6 for span in spans))
        del snapshots, store, collector, body
    medians = [statistics.median(column) for column in zip(*figures, strict=True)]
    return CpuFigures(count, *medians)


def bench_size(series: int, args: argparse.Namespace) -> None:
    flags = ("--checkpoint", str(args.checkpoint)) if args.checkpoint is not None else ()
    with our_exporter(series, *flags) as (ours_url, server_process, count):
        pid = server_process.pid
        bodies = {encoding: fetch(ours_url, encoding) for encoding in ENCODINGS}
        rss = vm_kib(pid, "VmRSS")
        print(
            f"rss     series={count} after_render_MiB={rss / 1024:.1f} "
            f"body_identity_MiB={len(bodies['identity']) / 2**20:.1f} "
            f"body_gzip_MiB={len(bodies['gzip']) / 2**20:.2f}",
            flush=True,
        )
        # Prometheus asks for OpenMetrics first: a second cached rendering.
        for encoding in ENCODINGS:
            fetch(ours_url, encoding, OPENMETRICS)
        rss = vm_kib(pid, "VmRSS")
        print(f"rss     series={count} after_render_with_openmetrics_MiB={rss / 1024:.1f}")
        # Steady state: more polls (new values), each followed by scrapes of both formats.
        for _ in range(args.polls):
            repoll(server_process)
            for accept in (ACCEPT, OPENMETRICS):
                for encoding in ENCODINGS:
                    fetch(ours_url, encoding, accept)
        rss = vm_kib(pid, "VmRSS")
        # Scrapes do not wait for a render: the last poll's may still be under way, holding
        # both renderings and its own work. Settled is once it is done (and the heap trimmed).
        wait_idle(pid)
        settled, peak = vm_kib(pid, "VmRSS") / 1024, vm_kib(pid, "VmHWM") / 1024
        goal = SETTLED_GOALS_MIB.get(series)
        print(
            f"rss     series={count} after_{args.polls}_more_polls_MiB={rss / 1024:.1f} "
            f"settled_MiB={settled:.1f}"
            + (f" (goal <= {goal}: {met(settled <= goal)})" if goal else "")
            + f" peak_MiB={peak:.1f} peak/settled={peak / settled:.2f} "
            f"(goal <= 1.2: {met(peak <= 1.2 * settled)})",
            flush=True,
        )
        pause_ms, found, cpu_ms = keeper_round(server_process)
        kept = vm_kib(pid, "VmRSS")
        print(
            f"rss     series={count} after_full_collection_MiB={kept / 1024:.1f} "
            f"full_collection_ms={pause_ms:.1f} cpu_ms={cpu_ms:.1f} found={found}",
            flush=True,
        )
        # What a scrape costs the server, settled (above the text limit, the identity reply's
        # chunks are inflated as it is written).
        costs = {e: scrape_cpu_ms(ours_url, pid, e, SCRAPES_FOR_CPU[e]) for e in ENCODINGS}
        print(
            f"cpu     series={count} scrape_cpu_ms "
            + " ".join(f"{e}={costs[e]:.1f}" for e in ENCODINGS)
            + " (server CPU per scrape, one after another)",
            flush=True,
        )
        if args.rss_only:
            return
        with node_exporter(bodies["identity"]) as (node_url, node_pid):
            node_size = len(fetch(node_url, "identity"))
            print(
                f"info    series={count} node_exporter_body_identity_MiB={node_size / 2**20:.1f}",
                flush=True,
            )
            urls = {"ours": ours_url, "node_exporter": node_url}
            pids = {"ours": pid, "node_exporter": node_pid}
            durations = {
                (server, encoding): run_duration(urls[server], encoding, args)
                for server in SERVERS
                for encoding in args.encodings
            }
            wait_idle(node_pid)
            results: dict[tuple[str, str], list[WrkResult]] = {}
            for repeat in range(args.repeat):
                for encoding in args.encodings:
                    order = SERVERS if repeat % 2 == 0 else SERVERS[::-1]
                    for server in order:
                        key = (server, encoding)
                        result = run_wrk(urls[server], encoding, durations[key], args)
                        wait_idle(pids[server])
                        results.setdefault(key, []).append(result)
        peak = vm_kib(pid, "VmHWM")
        print(f"rss     series={count} peak_under_load_MiB={peak / 1024:.1f}", flush=True)
    for encoding in args.encodings:
        medians = {}
        for server in SERVERS:
            runs = results[(server, encoding)]
            medians[server] = WrkResult(
                statistics.median(r.p50_ms for r in runs),
                statistics.median(r.p99_ms for r in runs),
                statistics.median(r.requests_per_s for r in runs),
                sum(r.errors for r in runs),
            )
            spread = " ".join(f"{r.p50_ms:.2f}/{r.p99_ms:.2f}/{r.requests_per_s:.1f}" for r in runs)
            m = medians[server]
            print(
                f"scrape  series={count} encoding={encoding} server={server} "
                f"p50_ms={m.p50_ms:.2f} p99_ms={m.p99_ms:.2f} req_per_s={m.requests_per_s:.1f} "
                f"errors={m.errors} duration_s={durations[(server, encoding)]} "
                f"runs(p50/p99/rps)={spread}",
                flush=True,
            )
        ours, node = medians["ours"], medians["node_exporter"]
        print(
            f"ratio   series={count} encoding={encoding} ours/node_exporter "
            f"p50={_ratio(ours.p50_ms, node.p50_ms)} p99={_ratio(ours.p99_ms, node.p99_ms)} "
            f"req_per_s={_ratio(ours.requests_per_s, node.requests_per_s)}",
            flush=True,
        )


def _ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.3f}" if theirs else "n/a"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--series", default="10000,100000", help="comma-separated sizes (default 10000,100000)"
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument(
        "--timeout",
        type=int,
        default=120,
        help="wrk request timeout, seconds (its default 2 s hides slow replies)",
    )
    parser.add_argument(
        "--min-rounds",
        type=int,
        default=2,
        help="lengthen a server's wrk runs so that each connection gets about "
        "this many replies (0: always --duration)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="wrk runs per server and encoding")
    add_pace_ms(parser)
    parser.add_argument("--encodings", default=",".join(ENCODINGS))
    parser.add_argument(
        "--polls", type=int, default=5, help="polls after the first, for the steady-state RSS"
    )
    parser.add_argument(
        "--checkpoint",
        type=int,
        help="bench.serve's jobs per checkpoint (default: a twentieth; 0: one round)",
    )
    parser.add_argument("--build-runs", type=int, default=5, help="runs for the CPU figures")
    parser.add_argument("--no-scrape", action="store_true", help="CPU figures only")
    parser.add_argument(
        "--rss-only", action="store_true", help="RSS figures only (no wrk, no node_exporter)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke test: 10k only, 8 connections, 3 s, 1 repeat, 2 rounds, 2 polls, 3 build runs",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="the smoke test's run (tests/bench/): 1.2k only, 4 connections, 1 s, 1 repeat, "
        "2 rounds, 1 poll, 1 build run, 200 ms pace; every figure line is printed, none is "
        "worth reading",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        # Over 1,000 series, as the smoke test asks: 3 synthetic jobs.
        args.series, args.duration, args.repeat, args.build_runs = "1200", 1, 1, 1
        # Two rounds, as --quick: at load 7 a 1 s run got no reply from node_exporter.
        args.connections, args.min_rounds, args.polls = 4, 2, 1
        # A few requests a second per connection: the load is not what a smoke run checks.
        args.pace_ms = 200
    elif args.quick:
        args.series, args.duration, args.repeat, args.build_runs = "10000", 3, 1, 3
        # Two rounds over 8 connections: one round sized from an unloaded fetch left
        # node_exporter's 32 concurrent replies outside a 4 s run on a busy machine.
        args.connections, args.min_rounds, args.polls = 8, 2, 2
    args.sizes = [int(s) for s in args.series.split(",")]
    args.encodings = [e for e in args.encodings.split(",") if e]
    unknown = set(args.encodings) - set(ENCODINGS)
    if unknown:
        parser.error(f"unknown encodings {sorted(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = [tool for tool in (WRK, NODE_EXPORTER) if not shutil.which(tool)]
    if missing and not args.no_scrape:
        print(f"missing {', '.join(missing)}", file=sys.stderr)
        return 2
    print(
        f"info    cores={os.cpu_count()} loadavg_start={os.getloadavg()[0]:.2f} "
        f"wrk=-c{args.connections} -t{args.threads} -d{args.duration}s x{args.repeat} "
        f"accept={ACCEPT!r}",
        flush=True,
    )
    for series in args.sizes:
        cpu = cpu_per_series(series, args.build_runs)
        print(
            f"cpu     series={cpu.series} build_us_per_series={cpu.build_us:.2f} "
            f"render_us_per_series={cpu.render_us:.2f} "
            f"total_us_per_series={cpu.build_us + cpu.render_us:.2f} "
            f"render_openmetrics_us_per_series={cpu.render_openmetrics_us:.2f} "
            f"gzip_us_per_series={cpu.gzip_us:.2f} (median of {args.build_runs})",
            flush=True,
        )
    if not args.no_scrape:
        for series in args.sizes:
            bench_size(series, args)
    print(f"info    loadavg_end={os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
