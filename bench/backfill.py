"""What a backfill costs the provider: points written per request, and requests per job per
day of history, at the defaults (every AIHC metric type at 60 s steps, every Alaya type with
pod details), each provider on its own.

The simulator runs in this process with jobs that ran the whole window (AIHC: `--aihc-jobs`
jobs of `--aihc-pods` pods; Alaya: `--alaya-jobs` jobs of `--alaya-pods` pods of 8 cards); the
backfill is the real command, a subprocess, at `--requests-per-second` (which changes how
long it takes, not what it asks). Requests are the simulator's count; points are the samples
in the file. The peer: the live exporter exports one point per metric call (the newest), so
"x live" is how many more points each request yields.

Then the output paths side by side, in the same run, over the same history (both targets):
the OpenMetrics file, and remote write into a real Prometheus 2.42 (its out-of-order window
longer than the history) and a real VictoriaMetrics 1.79, both started here on free ports. Each
is a whole backfill; the figure is its output phase as the command reports it (the file's
writing; remote write's planning and sending, every request answered), in samples per second
and as a ratio to the file path's.

    python -m bench.backfill              # 1 day
    python -m bench.backfill --days 7
"""

from __future__ import annotations

import argparse
import asyncio
import math
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from exporter.simulator import Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld
from tests.backfill.real_stores import RealStore, start_prometheus, start_victoria

ROOT = Path(__file__).resolve().parent.parent
POOL = "cce-bench0001"
DAY = 86400
METRIC_CALLS = ("DescribeJobMetrics", "gpu-metrics")
WROTE = re.compile(r"wrote (\d+) samples of \d+ jobs to \S+ in ([\d.]+) s")
SENT = re.compile(r"this run (\d+) in (\d+) requests in ([\d.]+) s")


@dataclass
class Cost:
    provider: str
    jobs: int
    days: float
    requests: Counter[str]
    samples: int
    metric_samples: int
    seconds: float
    # CPU the backfill process used (user + system).
    cpu: float

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def row(self) -> str:
        metric_calls = sum(self.requests[e] for e in METRIC_CALLS)
        per_call = self.metric_samples / metric_calls if metric_calls else 0.0
        per_request = self.samples / self.total if self.total else 0.0
        per_job_day = self.total / self.jobs / self.days
        return (
            f"| {self.provider} | {self.jobs} | {self.days:g} | {self.total} "
            f"| {per_job_day:.1f} | {per_request:.0f} | {per_call:.0f} ({per_call:.0f}x live) "
            f"| {self.seconds:.1f} | {self.cpu / self.total * 1000:.1f} |"
        )


def config(url: str, alaya: AlayaWorld) -> dict[str, object]:
    return {
        "aihc": [
            {
                "name": "bench-aihc",
                "endpoint": url,
                "access_key_id": DEMO_ACCESS_KEY_ID,
                "secret_access_key": DEMO_SECRET_ACCESS_KEY,
                "resource_pool_id": POOL,
            }
        ],
        "alaya": [
            {
                "name": "bench-alaya",
                "endpoint": url,
                "api_key": DEMO_API_KEY,
                "jobs": [{"id": j, "pods": pods} for j, pods in alaya.jobs.items()],
            }
        ],
    }


async def run_backfill(config: Path, window: tuple[int, int], rps: float, *args: str) -> str:
    """One backfill command over `window`; its stderr (SystemExit when it fails)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "exporter",
        "backfill",
        "--config",
        str(config),
        "--since",
        str(window[0]),
        "--until",
        str(window[1]),
        "--requests-per-second",
        str(rps),
        *args,
        cwd=ROOT,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"backfill failed: {err.decode()}")
    return err.decode()


async def measure(args: argparse.Namespace, work: Path) -> tuple[list[Cost], list[Throughput]]:
    now = time.time()
    # [since, until] holds exactly `days` x 86,400 seconds: both ends are read.
    until = int(now - 120) // 60 * 60 - 1
    since = until + 1 - int(args.days * DAY)
    aihc = AihcWorld.fixed(1, pools={POOL: ["default"]}, jobs=0)
    for _ in range(args.aihc_jobs):
        aihc.add_job(status="Running", pods=args.aihc_pods, created_at=since - 3600)
    alaya = AlayaWorld(1, job_count=args.alaya_jobs, pods_per_job=args.alaya_pods)
    simulator = Simulator(seed=1, aihc=aihc, alaya=alaya)
    costs = []
    async with running(simulator) as served:
        path = work / "exporter.yaml"
        path.write_text(yaml.safe_dump(config(served.url, alaya)))
        for provider, target, jobs in (
            ("aihc", "bench-aihc", args.aihc_jobs),
            ("alaya", "bench-alaya", args.alaya_jobs),
        ):
            simulator.log.clear()
            output = work / f"{provider}.om"
            started = time.monotonic()
            cpu_before = _children_cpu()
            rps = args.requests_per_second
            await run_backfill(
                path, (since, until), rps, "--target", target, "--output", str(output)
            )
            seconds = time.monotonic() - started
            cpu = _children_cpu() - cpu_before
            requests = Counter(e.endpoint for e in simulator.log.entries)
            samples = metric = 0
            with output.open() as lines:
                for line in lines:
                    if line.startswith("#"):
                        continue
                    samples += 1
                    if not line.startswith(("training_job_", "training_pod_info")):
                        metric += 1
            costs.append(Cost(provider, jobs, args.days, requests, samples, metric, seconds, cpu))
        outputs = await throughput(args, work, path, (since, until))
    return costs, outputs


@dataclass
class Throughput:
    output: str
    samples: int
    # None for the file.
    requests: int | None
    seconds: float

    @property
    def rate(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    def row(self, floor: Throughput) -> str:
        requests = "" if self.requests is None else str(self.requests)
        return (
            f"| {self.output} | {self.samples} | {requests} | {self.seconds:.2f} "
            f"| {self.rate:,.0f} | {self.rate / floor.rate:.2f} |"
        )


async def throughput(
    args: argparse.Namespace, work: Path, config: Path, window: tuple[int, int]
) -> list[Throughput]:
    """The file path's output phase, then remote write's into each real store."""
    rps = args.requests_per_second
    err = await run_backfill(config, window, rps, "--output", str(work / "all.om"))
    wrote = WROTE.search(err)
    assert wrote is not None, err
    found = [Throughput("OpenMetrics file", int(wrote[1]), None, float(wrote[2]))]
    # Out-of-order window: the whole history, and the two minutes before now.
    hours = math.ceil(args.days * 24) + 1
    stores: list[tuple[str, RealStore]] = []
    try:
        (work / "prometheus").mkdir()
        stores.append(("Prometheus 2.42", start_prometheus(work / "prometheus", f"{hours}h")))
        (work / "victoria").mkdir()
        stores.append(("VictoriaMetrics 1.79", start_victoria(work / "victoria")))
        for name, store in stores:
            out = str(work / f"rest-{store.name}.om")
            err = await run_backfill(
                config, window, rps, "--output", out, "--remote-write", store.write_url
            )
            sent = SENT.search(err)
            assert sent is not None, err
            label = f"remote write, {name}"
            found.append(Throughput(label, int(sent[1]), int(sent[2]), float(sent[3])))
    finally:
        for _, store in stores:
            store.stop()
    return found


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--days", type=float, default=1.0)
    p.add_argument("--aihc-jobs", type=int, default=4)
    p.add_argument("--aihc-pods", type=int, default=2)
    p.add_argument("--alaya-jobs", type=int, default=2)
    p.add_argument("--alaya-pods", type=int, default=3)
    p.add_argument("--requests-per-second", type=float, default=50.0)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        costs, outputs = asyncio.run(measure(args, Path(tmp)))
    print(
        "| provider | jobs | days | requests | requests / job / day | samples / request "
        "| metric points / metric call | seconds | backfill CPU ms / request |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for cost in costs:
        print(cost.row())
    for cost in costs:
        print(f"{cost.provider} requests by endpoint: {dict(sorted(cost.requests.items()))}")
    print()
    print("| output (both targets) | samples | requests | output seconds | samples/s | x file |")
    print("|---|---|---|---|---|---|")
    for output in outputs:
        print(output.row(outputs[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
