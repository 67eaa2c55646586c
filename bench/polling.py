"""Scrapes under real polling: scrape latency while the exporter polls, and its CPU per request.

The simulator (`python -m exporter simulate`, its own process) serves 250 AIHC jobs x 8 pods;
the exporter (from `--checkout`, its own process, as `bench.budget` runs it) polls it at
`requests_per_second: 50`; one scraper asks for `/metrics` with gzip every 0.5 s, as
Prometheus would. After a warm-up, two phases:

- busy: the scrapes' latencies, and the exporter's CPU (user + system, from /proc) over the
  requests the simulator served meanwhile (from its request log): what a provider request
  costs in parse, merge and render together, scrapes included;
- idle: the simulator is stopped (SIGSTOP; the target's timeout is raised past the phase, so
  no call fails and nothing changes), and the same scraper runs on against the same store.

    python -m bench.polling                        # 40 s warm-up, 90 s busy, 45 s idle
    python -m bench.polling --checkout /path/to/other/checkout

Goals (issue 20): busy p99 <= 2 x idle p99; CPU per provider request <= 1 ms.
"""

from __future__ import annotations

import argparse
import gzip
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import yaml

from bench.budget import SCENARIOS, config, read_log, start_exporter
from bench.scrape import cpu_seconds
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
    workdir = Path(tempfile.mkdtemp(prefix="bench-polling-"))
    log = workdir / "requests.tsv"
    simulator, sim_url = start_simulator(
        ("--seed", "42", *scenario.flags, "--request-log", str(log))
    )
    settings = config(scenario, sim_url, 1.0)
    for target in settings["aihc"]:  # type: ignore[attr-defined]
        # No call times out while the simulator is stopped for the idle phase.
        target["limits"] = {"requests_per_second": RATE, "timeout": args.idle + 60}
    path = workdir / "exporter.yaml"
    path.write_text(yaml.safe_dump(settings))
    exporter, url = start_exporter(path, args.checkout, workdir / "exporter.log")
    stopped = threading.Event()
    try:
        time.sleep(args.warmup)
        cpu_before = cpu_seconds(exporter.pid)
        split_before = cpu_split(exporter.pid)
        started = time.time()
        busy, busy_lines = scrape_for(f"{url}/metrics", args.busy)
        ended = time.time()
        cpu = cpu_seconds(exporter.pid) - cpu_before
        user, system = (b - a for a, b in zip(split_before, cpu_split(exporter.pid), strict=True))
        os.kill(simulator.pid, signal.SIGSTOP)
        stopped.set()
        time.sleep(2)
        idle, idle_lines = scrape_for(f"{url}/metrics", args.idle)
    finally:
        if stopped.is_set():
            os.kill(simulator.pid, signal.SIGCONT)
        exporter.terminate()
        exporter.wait(20)
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


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of `pid`: on loopback, the kernel's half of a send
    includes delivering it to the simulator, so the split says how much is ours to cut."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the exporter to measure")
    parser.add_argument("--warmup", type=float, default=40.0, help="seconds before measuring")
    parser.add_argument("--busy", type=float, default=90.0, help="seconds scraped while polling")
    parser.add_argument("--idle", type=float, default=45.0, help="seconds scraped when idle")
    args = parser.parse_args()
    args.checkout = args.checkout.resolve()
    print(
        f"info    cores={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f} "
        f"checkout={args.checkout} rate={RATE:g}/s scrape_every={SCRAPE_EVERY}s gzip",
        flush=True,
    )
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
