"""What the request budget buys at pool scale: pace, freshness and use, read off the wire.

Two scenarios, each with the defaults but its size and budget: AIHC, 250 running jobs x 8 pods
(all 22 metric types, pods, events) at `requests_per_second: 10`; Alaya, 500 pods (125 jobs x 4)
x 4 types and the pod's basic at 10 requests/s. The simulator (`python -m exporter simulate`)
and the exporter (`python -m exporter --config ...`, from `--checkout`, so an older checkout
can be measured the same way) run as their own processes; the simulator writes every request
it served with its time, job and item, and the figures come from that log:

- peak: the most requests in any one-second window (goal: <= budget + 1);
- gpu age: after warm-up (every job's every item read once, then two fast intervals for the
  fast tier to find its pace again), the longest any job (AIHC) or pod (Alaya) went without a
  GPU-utilisation read (goal: <= 2 x the fast tier's interval);
- tiers: per tier, the longest gap between two reads of one item of one unit, over the
  tier's effective interval as the exporter exported it meanwhile (sampled every fast
  interval; the largest value in force during the gap) (goal: <= 1);
- use: requests after warm-up over budget x time (goal: >= 0.9 while the plan needs more).

`--scale K` divides every interval by K and multiplies the budget by K: the same calls per
interval, the same plan, K times sooner (default 10: a 6 s fast tier at 100 requests/s). The
run lasts long enough for the slowest effective interval to come round twice after warm-up.

    python -m bench.budget [--scenario aihc|alaya|both] [--scale 10] [--checkout PATH]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.scratch import scratch
from bench.simulator import start_simulator
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld
from exporter.simulator.core import busiest_window
from exporter.work.tiers import default_tier

ROOT = Path(__file__).resolve().parent.parent
SEED = 42
BUDGET = 10.0
POLL = 60.0


@dataclass(frozen=True)
class Scenario:
    provider: str
    gpu_item: str
    # simulator flags
    flags: tuple[str, ...]
    jobs: int
    pods: int


SCENARIOS = {
    "aihc": Scenario("aihc", "GpuUsage", ("--aihc-jobs", "250", "--aihc-pods", "8"), 250, 8),
    "alaya": Scenario("alaya", "gpu", ("--alaya-jobs", "125", "--alaya-pods", "4"), 125, 4),
}


# (unix time, tier -> effective interval) as sampled from the exporter during a run.
Timeline = list[tuple[float, dict[str, float]]]


@dataclass(frozen=True)
class Request:
    at: float
    endpoint: str
    status: int
    unit: str
    item: str


def config(scenario: Scenario, url: str, scale: float) -> dict[str, object]:
    limits = {"requests_per_second": BUDGET * scale}
    target: dict[str, object] = {"name": "bench", "endpoint": url, "limits": limits}
    if scenario.provider == "aihc":
        target.update(
            access_key_id=DEMO_ACCESS_KEY_ID,
            secret_access_key=DEMO_SECRET_ACCESS_KEY,
            resource_pool_id=DEMO_RESOURCE_POOL,
        )
    else:
        world = AlayaWorld(SEED, job_count=scenario.jobs, pods_per_job=scenario.pods)
        jobs = [{"id": job_id, "pods": pods} for job_id, pods in world.jobs.items()]
        target.update(api_key=DEMO_API_KEY, jobs=jobs)
    return {
        "poll_interval": f"{POLL / scale:g}s",
        "web": {"listen_address": "127.0.0.1:0"},
        "log": {"level": "warning"},
        scenario.provider: [target],
    }


def start_exporter(path: Path, checkout: Path, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TJE_")}
    env["PYTHONPATH"] = str(checkout)
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", "--config", str(path), "--log.level", "info"],
            cwd=checkout,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    for _ in range(400):
        for line in log.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "listening":
                return process, f"http://{event['bound'][0]}"
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    raise SystemExit(f"exporter did not start: {log.read_text()[-2000:]}")


def gauges(url: str) -> dict[str, dict[str, float]]:
    """The plan the exporter exports: required rps and each tier's effective interval."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    found: dict[str, dict[str, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "training_exporter_tier_interval_seconds":
                found["tier"][s.labels["tier"]] = s.value
            elif s.name == "training_exporter_budget_required_requests_per_second":
                found["required"]["rps"] = s.value
    return found


def read_log(path: Path) -> list[Request]:
    requests = []
    for line in path.read_text().splitlines():
        at, endpoint, status, unit, item = line.split("\t")
        requests.append(Request(float(at), endpoint, int(status), unit, item))
    return sorted(requests, key=lambda r: r.at)


def peak(requests: list[Request]) -> int:
    return busiest_window(r.at for r in requests)


def reads(requests: list[Request]) -> dict[tuple[str, str], list[float]]:
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in requests:
        if r.unit and r.status == 200:
            found[(r.unit, r.item)].append(r.at)
    return found


def longest_gaps(times: list[float], since: float, end: float) -> float:
    """The longest stretch in [since, end] without a read; reads after `end` do not count."""
    kept = [t for t in times if since <= t <= end]
    before = [t for t in times if t < since]
    marks = [before[-1] if before else since, *kept, end]
    return max(b - a for a, b in itertools.pairwise(marks))


def run(scenario: Scenario, scale: float, checkout: Path, duration: float | None) -> None:
    workdir = scratch("bench-budget-")
    log = workdir / "requests.tsv"
    simulator, url = start_simulator(
        ("--seed", str(SEED), *scenario.flags, "--request-log", str(log))
    )
    path = workdir / "exporter.yaml"
    path.write_text(yaml.safe_dump(config(scenario, url, scale)))
    exporter, exporter_url = start_exporter(path, checkout, workdir / "exporter.log")
    started = time.time()
    plan: dict[str, dict[str, float]] = {}
    timeline: Timeline = []
    try:
        time.sleep(max(2.0, 3 * POLL / scale))
        plan = gauges(exporter_url)
        slowest = max(plan.get("tier", {}).values(), default=POLL / scale)
        # Warm-up (one full read) plus the slowest effective interval twice, and a margin.
        calls = scenario.jobs * (24 if scenario.provider == "aihc" else scenario.pods * 5)
        wanted = duration or calls / (BUDGET * scale) + 2.2 * slowest + 3 * POLL / scale
        print(
            f"info    scenario={scenario.provider} scale={scale:g} running {wanted:.0f} s "
            f"(checkout {checkout})",
            flush=True,
        )
        while time.time() < started + wanted:
            plan = gauges(exporter_url) or plan
            timeline.append((time.time(), dict(plan.get("tier", {}))))
            time.sleep(POLL / scale)
    finally:
        exporter.terminate()
        exporter.wait(20)
        simulator.terminate()
        simulator.communicate(timeout=30)
    report(scenario, scale, read_log(log), plan, timeline, started)


def in_force(
    timeline: list[tuple[float, dict[str, float]]], tier: str, a: float, b: float
) -> float:
    """The largest effective interval of `tier` exported while a gap [a, b] lasted."""
    values = [tiers[tier] for at, tiers in timeline if a - 10 <= at <= b and tier in tiers]
    return max(values, default=0.0)


def report(
    scenario: Scenario,
    scale: float,
    requests: list[Request],
    plan: dict[str, dict[str, float]],
    timeline: Timeline,
    started: float,
) -> None:
    budget = BUDGET * scale
    fast = POLL / scale
    by_item = reads(requests)
    end = requests[-1].at
    tiers = plan.get("tier", {})
    first_full = max(times[0] for times in by_item.values())
    warm = first_full + 2 * tiers.get("fast", fast)
    name = f"provider={scenario.provider} scale={scale:g}"
    required = plan.get("required", {}).get("rps")
    shown = " ".join(f"{t}={s:.1f}s" for t, s in tiers.items()) or "none exported"
    print(
        f"plan    {name} budget_rps={budget:g} required_rps="
        f"{'n/a' if required is None else f'{required:.1f}'} effective_intervals {shown}"
    )
    print(
        f"warmup  {name} first_full_read_s={first_full - started:.1f} "
        f"measured_s={end - warm:.1f} requests={len(requests)}"
    )
    top = peak(requests)
    print(f"peak    {name} max_requests_in_1s={top} goal<={budget + 1:g} {_met(top <= budget + 1)}")
    gpu = [longest_gaps(t, warm, end) for (_, i), t in by_item.items() if i == scenario.gpu_item]
    oldest = max(gpu)
    print(
        f"gpu_age {name} oldest_gpu_read_s={oldest:.1f} fast_interval_s={fast:g} "
        f"ratio={oldest / fast:.2f} goal<=2 {_met(oldest <= 2 * fast)}"
    )
    # Per tier: the worst gap relative to the interval in force (or in seconds, without one).
    worst: dict[str, tuple[float, float, float]] = {}
    for (_, item), times in by_item.items():
        tier = default_tier(scenario.provider, item)
        marks = [t for t in times if t >= warm]
        for a, b in itertools.pairwise(marks):
            effective = in_force(timeline, tier, a, b)
            ratio = (b - a) / effective if effective else 0.0
            if tier not in worst or (ratio, b - a) > worst[tier][:2]:
                worst[tier] = (ratio, b - a, effective)
    for tier_name, (ratio, gap, effective) in sorted(worst.items(), key=lambda kv: kv[1][1]):
        shown = f"{ratio:.2f}" if effective else "n/a"
        print(
            f"tier    {name} tier={tier_name} longest_gap_s={gap:.1f} effective_interval_s="
            f"{effective:.1f} ratio={shown} goal<=1 {_met(0 < ratio <= 1)}"
        )
    after = sum(1 for r in requests if r.at >= warm)
    used = after / (budget * (end - warm))
    over = required is not None and required > budget
    print(
        f"use     {name} used_over_budget={used:.3f} plan_exceeds_budget={over} "
        f"goal>=0.9 {_met(used >= 0.9) if over else '(not over budget)'}"
    )


def _met(ok: bool) -> str:
    return "met" if ok else "MISSED"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scenario", choices=["aihc", "alaya", "both"], default="both")
    p.add_argument("--scale", type=float, default=10.0)
    p.add_argument("--checkout", type=Path, default=ROOT, help="the exporter to measure")
    p.add_argument("--duration", type=float, help="seconds per scenario (default: enough)")
    args = p.parse_args()
    names = ["aihc", "alaya"] if args.scenario == "both" else [args.scenario]
    print(f"info    cores={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}", flush=True)
    for name in names:
        run(SCENARIOS[name], args.scale, args.checkout.resolve(), args.duration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
