"""Scrapes under real polling: scrape latency while the exporter polls, and its CPU per request.

The simulator (`python -m exporter simulate`, its own process) serves 250 AIHC jobs x 8 pods;
the exporter (from `--checkout`, its own process, as `bench.budget` runs it) polls it at
`requests_per_second: 50` (`--rate`); one scraper asks for `/metrics` with gzip every 0.5 s, as
Prometheus would. After a warm-up, two phases:

- busy: the scrapes' latencies, and the exporter's CPU (user + system, from /proc) over the
  requests the simulator served meanwhile (from its request log): what a provider request
  costs in parse, merge and render together, scrapes included;
- idle: the simulator is stopped (SIGSTOP; the target's timeout is raised past the phase, so
  no call fails and nothing changes), and the same scraper runs on against the same store.

Then the floor: the exporter stopped, `bench.transport_floor` in its own process sends
DescribeJobMetrics calls to the same simulator at the rate the exporter kept, with a bare
aiohttp client that reads each body and does nothing else. What the exporter spends above it
is its parse, merge and render (and the scrapes); the floor itself is the loop and aiohttp.

    python -m bench.polling                        # 40 s warm-up, 90 s busy, 45 s idle, 40 s floor
    python -m bench.polling --checkout /path/to/other/checkout
    python -m bench.polling --rate 10              # the issue's second case (10 req/s)

Goals (issue 20): busy p99 <= 2 x idle p99; CPU per provider request <= 1 ms (printed
whole, above the floor, and without the scrapes: the idle phase's CPU per second, its
scrapes and the loop waiting, taken off the busy phase's).
"""

from __future__ import annotations

import argparse
import gzip
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import yaml

from bench.budget import SCENARIOS, config, read_log, start_exporter
from bench.measure import cpu_seconds, cpu_split, fetch
from bench.scratch import scratch
from bench.simulator import start_simulator

ROOT = Path(__file__).resolve().parent.parent
RATE = 50.0
SCRAPE_EVERY = 0.5


def scrape(url: str) -> tuple[float, int]:
    """Seconds for one gzip scrape, whole body read; and the series in it."""
    request = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as reply:
        body = reply.read()
    took = time.perf_counter() - started
    lines = gzip.decompress(body).count(b"\n")
    return took, lines


def scrape_for(url: str, seconds: float) -> tuple[list[float], int]:
    """Scrape every SCRAPE_EVERY s for `seconds`: latencies (s) and the last body's lines."""
    times: list[float] = []
    lines = 0
    end = time.monotonic() + seconds
    tick = time.monotonic()
    while tick < end:
        took, lines = scrape(url)
        times.append(took)
        tick += SCRAPE_EVERY
        time.sleep(max(0.0, tick - time.monotonic()))
    return times, lines


def counter_sums(url: str, families: Sequence[str], encoding: str = "identity") -> list[float]:
    """Each of the exporter's counter `families`, summed over its series, from one scrape of
    `url` (gzip: a few ms of its CPU at the whole pool, identity: a hundred)."""
    body = fetch(f"{url}/metrics", encoding)
    text = (gzip.decompress(body) if encoding == "gzip" else body).decode()
    prefixes = [f"{family}{{" for family in families]
    sums = [0.0] * len(prefixes)
    for line in text.splitlines():
        for k, prefix in enumerate(prefixes):
            if line.startswith(prefix):
                sums[k] += float(line.rsplit(" ", 1)[1])
    return sums


def requests_made(url: str) -> float:
    """The exporter's own count of requests sent (the simulator's log comes at its exit)."""
    return counter_sums(url, ["training_exporter_api_requests_total"])[0]


def transport_floor(sim_url: str, rate: float, seconds: float) -> float:
    """CPU ms per request of `bench.transport_floor` at `rate`, in its own process."""
    return floor_figures(sim_url, rate, seconds)[0]


def floor_figures(sim_url: str, rate: float, seconds: float) -> tuple[float, float]:
    """CPU ms per request of `bench.transport_floor` at `rate`, in its own process, and how
    often its loop blocked a request."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.transport_floor",
            sim_url,
            "--rate",
            f"{rate:.2f}",
            "--seconds",
            str(seconds),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 120,
    )
    fields = dict(f.split("=", 1) for f in done.stdout.split()[1:])
    if fields["failed"] != "0":
        raise SystemExit(f"the floor's requests failed: {done.stdout}")
    requests = int(fields["requests"])
    return float(fields["cpu_s"]) / requests * 1000, int(fields["blocks"]) / requests


def figures(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return (
        f"scrapes={len(ms)} p50_ms={statistics.median(ms):.2f} p99_ms={p99:.2f} max_ms={ms[-1]:.2f}"
    )


def p99(times: list[float]) -> float:
    ms = sorted(times)
    return ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]


def run(args: argparse.Namespace) -> None:
    scenario = SCENARIOS["aihc"]
    workdir = scratch("bench-polling-")
    log = workdir / "requests.tsv"
    simulator, sim_url = start_simulator(
        ("--seed", "42", *scenario.flags, "--request-log", str(log))
    )
    settings = config(scenario, sim_url, 1.0)
    for target in settings["aihc"]:  # type: ignore[attr-defined]
        # No call times out while the simulator is stopped for the idle phase.
        target["limits"] = {"requests_per_second": args.rate, "timeout": args.idle + 60}
    path = workdir / "exporter.yaml"
    path.write_text(yaml.safe_dump(settings))
    exporter, url = start_exporter(path, args.checkout, workdir / "exporter.log")
    stopped = threading.Event()
    try:
        time.sleep(args.warmup)
        split_before = cpu_split(exporter.pid)
        made_before = requests_made(url)
        started = time.time()
        busy, busy_lines = scrape_for(f"{url}/metrics", args.busy)
        ended = time.time()
        made_after = requests_made(url)
        # On loopback the kernel's half of a send includes delivering it to the simulator:
        # the split says how much of the CPU is ours to cut.
        user, system = (b - a for a, b in zip(split_before, cpu_split(exporter.pid), strict=True))
        cpu = user + system
        os.kill(simulator.pid, signal.SIGSTOP)
        stopped.set()
        time.sleep(2)
        # The same scrapes with nothing polled: what serving them costs, per second.
        idle_cpu_before = cpu_seconds(exporter.pid)
        idle_started = time.time()
        idle, idle_lines = scrape_for(f"{url}/metrics", args.idle)
        idle_cpu = cpu_seconds(exporter.pid) - idle_cpu_before
        idle_per_s = idle_cpu / (time.time() - idle_started)
    finally:
        if stopped.is_set():
            os.kill(simulator.pid, signal.SIGCONT)
        exporter.terminate()
        exporter.wait(20)
    try:
        made = (made_after - made_before) / (ended - started)
        floor = transport_floor(sim_url, made, args.floor)
    finally:
        simulator.terminate()
        simulator.communicate(timeout=30)
    # The simulator writes its request log as it exits.
    requests = [r for r in read_log(log) if started <= r.at <= ended]
    rate = len(requests) / (ended - started)
    per_request = cpu / max(1, len(requests)) * 1000
    print(f"polling busy lines={busy_lines} {figures(busy)} provider_rps={rate:.1f}")
    print(f"polling idle lines={idle_lines} {figures(idle)}")
    ratio = p99(busy) / p99(idle)
    print(f"ratio   busy/idle scrape_p99={ratio:.2f} (goal <= 2: {_met(ratio <= 2)})")
    print(
        f"cpu     exporter_cpu_s={cpu:.2f} provider_requests={len(requests)} "
        f"cpu_ms_per_request={per_request:.2f} (goal <= 1: {_met(per_request <= 1)}) "
        f"user_s={user:.2f} system_s={system:.2f}",
        flush=True,
    )
    above = per_request - floor
    print(
        f"floor   bare_aiohttp_cpu_ms_per_request={floor:.2f} at {rate:.1f}/s "
        f"(bench.transport_floor) ours/floor={per_request / floor:.2f} "
        f"ours_above_floor_ms={above:.2f} (parse, merge, render, scrapes; goal <= 1: "
        f"{_met(above <= 1)})",
        flush=True,
    )
    # The idle phase's CPU (its scrapes, and the loop waiting) taken off the busy phase's.
    polling = (cpu - idle_per_s * (ended - started)) / max(1, len(requests)) * 1000
    print(
        f"scrapes idle_cpu_ms_per_s={idle_per_s * 1000:.1f} "
        f"cpu_ms_per_request_without_scrapes={polling:.2f} "
        f"above_floor_without_scrapes_ms={polling - floor:.2f} (parse, merge, render; goal <= 1: "
        f"{_met(polling - floor <= 1)})",
        flush=True,
    )


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the exporter to measure")
    parser.add_argument("--warmup", type=float, default=40.0, help="seconds before measuring")
    parser.add_argument("--busy", type=float, default=90.0, help="seconds scraped while polling")
    parser.add_argument("--idle", type=float, default=45.0, help="seconds scraped when idle")
    parser.add_argument("--rate", type=float, default=RATE, help="the target's requests/s")
    parser.add_argument("--floor", type=float, default=40.0, help="seconds of the bare client")
    args = parser.parse_args()
    args.checkout = args.checkout.resolve()
    print(
        f"info    cores={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f} "
        f"checkout={args.checkout} rate={args.rate:g}/s scrape_every={SCRAPE_EVERY}s gzip",
        flush=True,
    )
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
