"""One replica at four times the design point: 1,000 AIHC jobs x 8 pods, polled and scraped.

The simulator (`python -m exporter simulate --aihc-jobs 1000 --aihc-pods 8`, its own process)
serves the pool over HTTP; the exporter (from `--checkout`, its own process) polls it with the
defaults but its size and budget: `requests_per_second: 40`, `max_series` raised past the pool.
AIHC reports each metric type per pod (no per-card series), so 1,000 jobs are ~284k series;
`--jobs 1400` is the ~400k pool. `--budget B` sets the requests/s (at `--scale 1`): a budget
past the plan's needs reads the whole pool in minutes, for its memory.
A scraper asks for `/metrics` all run long, as Prometheus would: gzip every second, identity
every `--identity-every` seconds. The run:

- warm-up: until `/-/ready` (every item of every job read once), the RSS then is the one
  "after the first render". At 40 requests/s the plan needs 73.5: fast and medium reads take
  ~33 of them, and the slow tier's first reads come at the ~4 left, so the pool is whole after
  about 90 minutes at best (at `--scale 4`, over 20 minutes). `--steady-after S` starts the
  steady phase after S seconds with the pool as read so far (a line says so);
- steady: `--steady` seconds of polling and scraping: scrape latencies per encoding;
- idle: the simulator stopped (SIGSTOP, the target's timeout raised past the phase), the same
  scrapes for `--idle` seconds: what the scrapes cost per second, and the settled RSS;
- CPU rounds, `--rounds` of them: `--settle` seconds for the loop to catch up, the exporter's
  CPU (user + system, /proc) over `--window` seconds of polling and scraping, against the
  requests the simulator served meanwhile; then the exporter stopped (SIGSTOP) while
  `bench.transport_floor` sends DescribeJobMetrics calls to the same simulator at the rate the
  exporter kept in the steady phase, with a bare aiohttp client, for `--floor` / `--rounds`
  seconds. Interleaved, a machine whose speed drifts during the run moves both sides alike.

From the simulator's request log: each job's first read of its fast items, as a ratio to the
floor the budget sets ((list pages + jobs x fast items) / budget: `bench.warmup`'s), and the
longest any job went without a GPU-utilisation read within the steady phase (the reads the
stopped simulator serves after it do not count), as a ratio to the fast interval; and the
requests sent a second over the CPU windows, as a share of the budget. Goals (issue 38):
first reads <= 1.2 x the floor, GPU age <= 2 x the fast interval, steady scrape p99 <= 50 ms
with gzip, CPU per provider request (without the scrapes) <= 1.5 x the floor, peak RSS <= 1.2
x settled (settled <= 260 MiB at ~400k series).

    python -m bench.scale                         # 1,000 jobs, 40 req/s (~100 min: warm-up ~90)
    python -m bench.scale --scale 4               # intervals / 4, budget x 4: the same plan sooner
    python -m bench.scale --scale 4 --steady-after 1200   # steady from 20 minutes, whole or not
    python -m bench.scale --jobs 1400 --budget 400    # ~400k series, whole in minutes (memory)
    python -m bench.scale --jobs 20 --steady 20 --idle 5 --floor 5 --rounds 1 --window 5
    python -m bench.scale --checkout /path/to/other/checkout

Beside the CPU, each round's calls dropped unsent and rounds overrun (the exporter's own
counters: work that never reaches the simulator's log), and how often the loop thread blocked
a request (voluntary context switches: each wake from idle costs CPU of its own, bench/README.md).

`--scale K` divides the intervals by K and multiplies the budget by K, as `bench.budget` does:
the CPU per request then includes K times the renders per second. Every figure is a line
starting `scale`, `scrape`, `rss`, `cpu` or `floor`.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import os
import signal
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from bench.budget import Request, Scenario, config, longest_gaps, read_log, reads, start_exporter
from bench.measure import blocks, cpu_seconds, cpu_split, met, vm_kib
from bench.polling import counter_sums, floor_figures, requests_made
from bench.scratch import scratch
from bench.simulator import start_simulator
from bench.warmup import measure

ROOT = Path(__file__).resolve().parent.parent
JOBS = 1000
PODS = 8
BUDGET = 40.0
POLL = 60.0
SEED = 42
# Far above the pool: the default (200,000) would leave half of it out.
MAX_SERIES = 2_000_000


def scenario(jobs: int) -> Scenario:
    flags = ("--aihc-jobs", str(jobs), "--aihc-pods", str(PODS))
    return Scenario("aihc", "GpuUsage", flags, jobs, PODS)


@dataclass
class Scraper:
    """Scrapes `/metrics` in a thread: gzip every second, identity every `identity_every`."""

    url: str
    identity_every: float
    times: list[tuple[float, str, float]] = field(default_factory=list)
    lines: int = 0
    failed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    # Held by a scrape, and by `paused()` while the exporter is stopped for the floor.
    _turn: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Return with no scrape under way, and none to come."""
        self._stop.set()
        with self._turn:
            pass

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No scrape within: one sent to a stopped exporter would fail or wait."""
        with self._turn:
            yield

    def _run(self) -> None:
        tick = time.monotonic()
        identity_due = tick + self.identity_every
        while True:
            with self._turn:
                if self._stop.is_set():
                    return
                self._scrape("gzip")
                if time.monotonic() >= identity_due:
                    self._scrape("identity")
                    identity_due += self.identity_every
            tick += 1.0
            self._stop.wait(max(0.0, tick - time.monotonic()))

    def _scrape(self, encoding: str) -> None:
        headers = {"Accept-Encoding": "gzip"} if encoding == "gzip" else {}
        request = urllib.request.Request(self.url, headers=headers)
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                body = reply.read()
        except (OSError, urllib.error.URLError):
            self.failed += 1
            return
        took = time.perf_counter() - started
        self.times.append((time.time(), encoding, took))
        if encoding == "gzip":
            self.lines = gzip.decompress(body).count(b"\n")

    def between(self, encoding: str, start: float, end: float) -> list[float]:
        return [t for at, e, t in self.times if e == encoding and start <= at <= end]


def wait_ready(
    url: str, limit: float, scraper: Scraper, pid: int, steady_after: float | None
) -> tuple[float, float]:
    """(unix time, seconds after start) once `/-/ready` says 200, or once `steady_after`
    seconds have passed (said on stdout); SystemExit past `limit`."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=10):
                return time.time(), time.monotonic() - started
        except urllib.error.HTTPError:
            pass
        if steady_after is not None and time.monotonic() - started >= steady_after:
            rss = vm_kib(pid, "VmRSS") / 1024
            print(
                f"info    not ready after {steady_after:.0f} s (series {scraper.lines}, "
                f"rss {rss:.1f} MiB): the steady phase starts with the pool as read so far",
                flush=True,
            )
            return time.time(), time.monotonic() - started
        time.sleep(1.0)
    rss = vm_kib(pid, "VmRSS") / 1024
    raise SystemExit(f"not ready after {limit:.0f} s (series {scraper.lines}, rss {rss:.1f} MiB)")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


@dataclass
class Phases:
    """What the exporter did and cost between the marks of a run."""

    ready_at: float = 0.0
    ready_after: float = 0.0
    steady: tuple[float, float] = (0.0, 0.0)
    made_rate: float = 0.0
    # The CPU rounds: each window's (start, end), and CPU over all of them (user, system, and
    # of user + system the main thread's: the loop's reads and scrapes; the rest the other
    # threads': the renders, the resolver); each round's floor, ms per request.
    windows: list[tuple[float, float]] = field(default_factory=list)
    cpu_user: float = 0.0
    cpu_system: float = 0.0
    cpu_loop: float = 0.0
    floors: list[float] = field(default_factory=list)
    round_cpu: list[float] = field(default_factory=list)
    # Each window's calls dropped unsent (their turn came too late) and rounds overrun, by the
    # exporter's own counters: CPU spent on calls that never reach the simulator's log.
    round_dropped: list[float] = field(default_factory=list)
    round_overruns: list[float] = field(default_factory=list)
    # The loop thread's blocks (voluntary context switches) over all windows; the floor's a
    # request, each round.
    loop_blocks: int = 0
    floor_blocks: list[float] = field(default_factory=list)
    idle_cpu_per_s: float = 0.0
    rss_ready: float = 0.0
    rss_settled: float = 0.0
    rss_peak: float = 0.0


def drive(
    args: argparse.Namespace, url: str, pid: int, simulator: tuple[int, str], scraper: Scraper
) -> Phases:
    """Warm-up, steady, idle and CPU phases against a running exporter and simulator."""
    sim_pid, sim_url = simulator
    got = Phases()
    got.ready_at, got.ready_after = wait_ready(
        url, args.ready_limit, scraper, pid, args.steady_after
    )
    got.rss_ready = vm_kib(pid, "VmRSS") / 1024
    made = requests_made(url)
    start = time.time()
    time.sleep(args.steady)
    end = time.time()
    got.made_rate = (requests_made(url) - made) / (end - start)
    got.steady = (start, end)
    os.kill(sim_pid, signal.SIGSTOP)
    try:
        time.sleep(2)
        idle_cpu, idle_start = cpu_seconds(pid), time.time()
        time.sleep(args.idle)
        got.idle_cpu_per_s = (cpu_seconds(pid) - idle_cpu) / (time.time() - idle_start)
        got.rss_settled = vm_kib(pid, "VmRSS") / 1024
        got.rss_peak = vm_kib(pid, "VmHWM") / 1024
    finally:
        os.kill(sim_pid, signal.SIGCONT)
    for _ in range(args.rounds):
        cpu_round(args, (pid, url), sim_url, scraper, got)
    return got


def cpu_round(
    args: argparse.Namespace,
    exporter: tuple[int, str],
    sim_url: str,
    scraper: Scraper,
    got: Phases,
) -> None:
    """One window of the exporter's CPU, then the floor's with the exporter stopped."""
    pid, url = exporter
    time.sleep(args.settle)
    counts = lateness(url)
    split, loop, start, blocked = cpu_split(pid), loop_cpu(pid), time.time(), blocks(pid)
    time.sleep(args.window)
    after, end = cpu_split(pid), time.time()
    got.loop_blocks += blocks(pid) - blocked
    dropped, overruns = (b - a for a, b in zip(counts, lateness(url), strict=True))
    got.round_dropped.append(dropped)
    got.round_overruns.append(overruns)
    got.cpu_loop += loop_cpu(pid) - loop
    user, system = (b - a for a, b in zip(split, after, strict=True))
    got.cpu_user, got.cpu_system = got.cpu_user + user, got.cpu_system + system
    got.round_cpu.append(user + system)
    got.windows.append((start, end))
    with scraper.paused():
        os.kill(pid, signal.SIGSTOP)
        try:
            floor, floor_blocks = floor_figures(sim_url, got.made_rate, args.floor / args.rounds)
            got.floors.append(floor)
            got.floor_blocks.append(floor_blocks)
        finally:
            os.kill(pid, signal.SIGCONT)


def lateness(url: str) -> list[float]:
    """The exporter's calls dropped unsent and its rounds overrun so far (a gzip scrape,
    outside the windows)."""
    families = [
        "training_exporter_api_calls_dropped_total",
        "training_exporter_poll_overruns_total",
    ]
    return counter_sums(url, families, "gzip")


def loop_cpu(pid: int) -> float:
    """User + system CPU seconds of `pid`'s main thread, whose loop does all but the renders."""
    return sum(cpu_split(pid, thread=pid))


def run(args: argparse.Namespace) -> None:
    chosen = scenario(args.jobs)
    workdir = scratch("bench-scale-")
    log = workdir / "requests.tsv"
    flags = ("--seed", str(SEED), *chosen.flags, "--request-log", str(log))
    simulator, sim_url = start_simulator(flags)
    settings = config(chosen, sim_url, args.scale)
    budget = args.budget * args.scale
    for target in settings["aihc"]:  # type: ignore[attr-defined]
        target["limits"] = {"requests_per_second": budget, "timeout": args.idle + 60}
        target["max_series"] = MAX_SERIES
    path = workdir / "exporter.yaml"
    path.write_text(yaml.safe_dump(settings))
    started = time.time()
    try:
        exporter, url = start_exporter(path, args.checkout, workdir / "exporter.log")
        scraper = Scraper(f"{url}/metrics", args.identity_every)
        try:
            scraper.start()
            phases = drive(args, url, exporter.pid, (simulator.pid, sim_url), scraper)
        finally:
            scraper.stop()
            exporter.terminate()
            exporter.wait(30)
    finally:
        simulator.terminate()
        simulator.communicate(timeout=60)
    report(args, chosen, read_log(log), phases, scraper, started)


def report(
    args: argparse.Namespace,
    chosen: Scenario,
    requests: list[Request],
    phases: Phases,
    scraper: Scraper,
    started: float,
) -> None:
    name = f"jobs={chosen.jobs} pods={chosen.pods} scale={args.scale:g} series={scraper.lines}"
    budget, fast = args.budget * args.scale, POLL / args.scale
    took, first_floor, done, count = measure(requests, chosen, budget)
    ratio = took / first_floor
    print(
        f"scale   {name} first_reads_s={took:.1f} floor_s={first_floor:.1f} units={done}/{count} "
        f"ratio={ratio:.2f} (goal <= 1.2: {met(ratio <= 1.2)}) ready_s={phases.ready_after:.0f}"
    )
    start, end = phases.steady
    by_item = reads(requests)
    gpu = [longest_gaps(t, start, end) for (_, i), t in by_item.items() if i == chosen.gpu_item]
    age = max(gpu) / fast
    print(
        f"scale   {name} steady_s={end - start:.0f} oldest_gpu_read_s={max(gpu):.1f} "
        f"fast_interval_s={fast:g} ratio={age:.2f} (goal <= 2: {met(age <= 2)})"
    )
    for encoding in ("gzip", "identity"):
        times = [t * 1000 for t in scraper.between(encoding, start, end)]
        p99 = percentile(times, 0.99)
        goal = f" (goal <= 50: {met(p99 <= 50)})" if encoding == "gzip" else ""
        print(
            f"scrape  {name} encoding={encoding} while_polling scrapes={len(times)} "
            f"p50_ms={statistics.median(times):.1f} p99_ms={p99:.1f}{goal} max_ms={max(times):.1f}"
        )
    cpu_report(name, requests, phases, budget)
    settled, peak = phases.rss_settled, phases.rss_peak
    print(
        f"rss     {name} after_first_render_MiB={phases.rss_ready:.1f} peak_MiB={peak:.1f} "
        f"settled_MiB={settled:.1f} peak/settled={peak / settled:.2f} "
        f"(goal <= 1.2: {met(peak <= 1.2 * settled)}) failed_scrapes={scraper.failed}",
        flush=True,
    )


def cpu_report(name: str, requests: list[Request], phases: Phases, budget: float) -> None:
    """The CPU rounds: ours a request (without the scrapes: the idle phase's CPU a second
    taken off) against the floors, over all rounds, and each round's ratio."""
    windows = phases.windows

    def polling_ms(cpu: float, seconds: float, made: int) -> float:
        """CPU ms a request of `made` over `seconds` of polling, the scrapes' CPU taken off."""
        return (cpu - phases.idle_cpu_per_s * seconds) / max(1, made) * 1000

    served = [sum(1 for r in requests if start <= r.at <= end) for start, end in windows]
    seconds = sum(end - start for start, end in windows)
    cpu, count = phases.cpu_user + phases.cpu_system, max(1, sum(served))
    whole = cpu / count * 1000
    polling = polling_ms(cpu, seconds, count)
    floor = statistics.fmean(phases.floors)
    ratio = polling / floor
    rounds = "/".join(
        f"{polling_ms(c, end - start, n) / f:.2f}"
        for c, n, (start, end), f in zip(phases.round_cpu, served, windows, phases.floors)
    )
    others = max(0.0, cpu - phases.cpu_loop)
    print(
        f"cpu     {name} rounds={len(windows)} provider_requests={sum(served)} "
        f"rps={sum(served) / seconds:.1f} of_budget={sum(served) / seconds / budget:.3f} "
        f"cpu_ms_per_request={whole:.2f} without_scrapes={polling:.2f} "
        f"scrapes_cpu_ms_per_s={phases.idle_cpu_per_s * 1000:.1f} "
        f"loop_thread_ms_per_request={phases.cpu_loop / count * 1000:.2f} "
        f"other_threads_ms_per_request={others / count * 1000:.2f} "
        f"loop_blocks_per_request={phases.loop_blocks / count:.2f} "
        f"user_s={phases.cpu_user:.1f} system_s={phases.cpu_system:.1f}"
    )
    print(
        f"floor   {name} bare_aiohttp_cpu_ms_per_request={floor:.2f} "
        f"ours_without_scrapes/floor={ratio:.2f} (goal <= 1.5: {met(ratio <= 1.5)}) "
        f"ours_whole/floor={whole / floor:.2f} each_round={rounds} "
        f"floor_blocks_per_request={statistics.fmean(phases.floor_blocks):.2f} "
        f"dropped_each_round={'/'.join(f'{d:.0f}' for d in phases.round_dropped)} "
        f"overruns_each_round={'/'.join(f'{o:.0f}' for o in phases.round_overruns)}",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the exporter to measure")
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument(
        "--budget", type=float, default=BUDGET, help="requests/s at --scale 1 (default: 40)"
    )
    parser.add_argument("--steady", type=float, default=300.0, help="seconds polled and scraped")
    parser.add_argument("--idle", type=float, default=45.0, help="seconds scraped, nothing polled")
    parser.add_argument("--rounds", type=int, default=3, help="CPU rounds: ours, then the floor")
    parser.add_argument("--window", type=float, default=30.0, help="seconds of ours a round")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds before each window")
    parser.add_argument(
        "--floor", type=float, default=30.0, help="seconds of the bare client, over all rounds"
    )
    parser.add_argument("--identity-every", type=float, default=3.0, help="seconds")
    parser.add_argument("--ready-limit", type=float, help="seconds (default: 21,600 / scale)")
    parser.add_argument(
        "--steady-after",
        type=float,
        help="seconds: start the steady phase then if not ready (the pool partly read)",
    )
    args = parser.parse_args()
    args.checkout = args.checkout.resolve()
    args.ready_limit = args.ready_limit or 21600.0 / args.scale
    # Stopped from outside (kill PID): the simulator and the exporter are stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    print(
        f"info    cores={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f} "
        f"checkout={args.checkout} jobs={args.jobs} budget={args.budget * args.scale:g}/s",
        flush=True,
    )
    run(args)
    print(f"info    loadavg_end={os.getloadavg()[0]:.2f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
