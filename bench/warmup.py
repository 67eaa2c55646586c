"""How soon after a start every job (AIHC) or pod (Alaya) has its fast tier read once.

Real time, scale 1, the defaults but the size and budget (issue 19): AIHC 250 running jobs x 8
pods and Alaya 500 pods (125 jobs x 4), each at `requests_per_second: 10`. The simulator and
the exporter (from `--checkout`, so an older version is measured alike) run as their own
processes; the times come from the simulator's request log, counted from the first request it
served. The floor is what the budget allows at best: (list pages + units x fast items) /
budget, 50 s for either. Goal: time / floor <= 1.2.

    python -m bench.warmup [--scenario aihc|alaya|both] [--checkout PATH] [--limit 2.5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import yaml

from bench.budget import (
    BUDGET,
    ROOT,
    SCENARIOS,
    SEED,
    Request,
    Scenario,
    config,
    read_log,
    start_exporter,
)
from bench.scratch import scratch
from bench.simulator import start_simulator
from exporter.work.tiers import default_tier


def measure(
    requests: list[Request], scenario: Scenario, budget: float = BUDGET
) -> tuple[float, float, int, int]:
    """(seconds until every unit's fast items were read once, floor at `budget`, units done,
    units)."""
    start = requests[0].at
    pages = next((i for i, r in enumerate(requests) if r.unit), len(requests))
    fast: dict[str, dict[str, float]] = defaultdict(dict)
    units: set[str] = set()
    for r in requests:
        if not r.unit:
            continue
        units.add(r.unit)
        if r.status == 200 and default_tier(scenario.provider, r.item) == "fast":
            fast[r.unit].setdefault(r.item, r.at)
    items = {"aihc": 2, "alaya": 1}[scenario.provider]
    count = scenario.jobs * (1 if scenario.provider == "aihc" else scenario.pods)
    done = [max(t.values()) for t in fast.values() if len(t) == items]
    floor = (pages + count * items) / budget
    took = max(done) - start if len(done) == count else float("inf")
    return took, floor, len(done), count


def run(scenario: Scenario, checkout: Path, limit: float) -> None:
    workdir = scratch("bench-warmup-")
    log = workdir / "requests.tsv"
    simulator, url = start_simulator(
        ("--seed", str(SEED), *scenario.flags, "--request-log", str(log))
    )
    path = workdir / "exporter.yaml"
    path.write_text(yaml.safe_dump(config(scenario, url, 1.0)))
    exporter, _ = start_exporter(path, checkout, workdir / "exporter.log")
    # The floor is 50 s for either scenario; run `limit` times that, then read the log.
    try:
        time.sleep(limit * 50.0 + 5.0)
    finally:
        exporter.terminate()
        exporter.wait(20)
        simulator.terminate()
        simulator.communicate(timeout=30)
    took, floor, done, count = measure(read_log(log), scenario)
    name = f"provider={scenario.provider}"
    if done < count:
        print(
            f"warmup  {name} units_read={done}/{count} within {limit * 50:.0f} s "
            f"floor_s={floor:.1f} ratio>{limit * 50 / floor:.2f} goal<=1.2 MISSED",
            flush=True,
        )
        return
    met = "met" if took / floor <= 1.2 else "MISSED"
    print(
        f"warmup  {name} all_fast_read_s={took:.1f} floor_s={floor:.1f} "
        f"ratio={took / floor:.2f} goal<=1.2 {met}",
        flush=True,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scenario", choices=["aihc", "alaya", "both"], default="both")
    p.add_argument("--checkout", type=Path, default=ROOT, help="the exporter to measure")
    p.add_argument("--limit", type=float, default=2.0, help="run this many floors (50 s)")
    args = p.parse_args()
    names = ["aihc", "alaya"] if args.scenario == "both" else [args.scenario]
    print(f"info    cores={os.cpu_count()} loadavg={os.getloadavg()[0]:.2f}", flush=True)
    for name in names:
        run(SCENARIOS[name], args.checkout.resolve(), args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
