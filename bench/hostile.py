"""Hostile upstream replies, one case per finding, against any exporter checkout.

Serves this checkout's simulator in this process and runs the exporter of `--checkout` as a
subprocess (its own memory, read from /proc), waits for its first poll, then reads /metrics:

- `baseline`: 2 AIHC jobs x 2 pods, all 22 metric types, no fault: the RSS to compare with.
- `oversized-30MB`: one DescribeJobMetrics reply of 30 MB (1.25 M points).
- `oversized-22x300MB`: every DescribeJobMetrics reply 300 MB with a Content-Length;
  `...-chunked`: the same without one. The exporter is killed past `--rss-kill-mib`.
- `nested`: one DescribeJobMetrics reply nested 100,000 arrays deep, among 2 jobs.
- `strings`: names that clean to the same label (lone surrogates, 1,100-character job ids
  with a common prefix), an invalid UTF-8 byte in a pod name, Alaya's 100,000-character
  `gpuName`, and ratios of -1, 12345 and `1_000`.

    python -m bench.hostile                          # this checkout
    python -m bench.hostile --checkout /work/main    # the same cases against another one

Every figure is one line starting with the case's name.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.ports import listening_ports
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from exporter.simulator.aihc_jobs import SimPod
from exporter.simulator.alaya import DEMO_API_KEY, AlayaFault, AlayaWorld
from exporter.simulator.core import raw

REPO = Path(__file__).resolve().parent.parent
POOL = "cce-hostile01"
METRICS = "DescribeJobMetrics"
MB = 1_000_000


@dataclass
class Case:
    name: str
    simulator: Simulator
    # Extra keys of the AIHC target, and whether an Alaya target polls the Alaya world.
    aihc: dict[str, Any] = field(default_factory=dict)
    alaya: bool = False


@dataclass
class Outcome:
    peak_rss_mib: float
    rss_mib: float
    seconds: float
    killed: bool
    text: str = ""
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def value(self, name: str, **labels: str) -> float | None:
        for found, got, value in self.samples:
            if found == name and all(got.get(k) == v for k, v in labels.items()):
                return value
        return None

    def total(self, name: str, **labels: str) -> float:
        return sum(
            value
            for found, got, value in self.samples
            if found == name and all(got.get(k) == v for k, v in labels.items())
        )

    def count(self, predicate: Callable[[str, dict[str, str]], bool]) -> int:
        return sum(1 for name, got, _ in self.samples if predicate(name, got))

    def duplicates(self) -> int:
        seen = Counter((name, tuple(sorted(got.items()))) for name, got, _ in self.samples)
        return sum(n - 1 for n in seen.values() if n > 1)


def _aihc_world(jobs: int = 2) -> AihcWorld:
    return AihcWorld.fixed(pools={POOL: ["default"]}, jobs=jobs, pods_per_job=2)


def cases(only: set[str] | None = None) -> list[Case]:
    made: list[Case] = []

    def add(case: Case) -> None:
        if only is None or case.name in only:
            made.append(case)

    add(Case("baseline", Simulator(seed=5, aihc=_aihc_world())))
    sim = Simulator(seed=5, aihc=_aihc_world())
    sim.faults.only = frozenset({METRICS})
    sim.faults.script.append("oversized")
    sim.faults.oversized_bytes = 30 * MB
    add(Case("oversized-30MB", sim))
    for declared in (True, False):
        sim = Simulator(seed=5, aihc=_aihc_world(1))
        sim.faults.only = frozenset({METRICS})
        sim.faults.oversized_rate = 1.0
        sim.faults.oversized_bytes = 300 * MB
        sim.faults.oversized_declared = declared
        add(Case("oversized-22x300MB" + ("" if declared else "-chunked"), sim))
    sim = Simulator(seed=5, aihc=_aihc_world())
    sim.faults.only = frozenset({METRICS})
    sim.faults.script.append("nested")
    add(Case("nested", sim, aihc={"metric_types": ["GpuUsage"]}))
    add(Case("strings", strings_simulator(), aihc={"metric_types": ["GpuUsage"]}, alaya=True))
    return made


def strings_simulator() -> Simulator:
    world = AihcWorld.fixed(pools={POOL: ["default"]}, jobs=0)
    long_prefix = "x" * 1100
    odd = ("\ud800", "\ud801")
    for suffix in ("a", "b"):
        # Same 1,024-character prefix: one label before, two now.
        pods = [SimPod(f"worker-{i}", phase=f"Running{o}") for i, o in enumerate(odd)]
        job = world.add_job(job_id=long_prefix + suffix, pods=pods)
        job.event_items = [
            {"type": "Warning", "reason": f"Odd{o}", "count": 1, "lastTimestamp": ""} for o in odd
        ]
    for o in odd:
        world.add_job(status=f"Weird{o}", pods=1)
    world.add_job(pods=[SimPod(raw(b"pod-\xff")), SimPod("pod-ok")])
    alaya = AlayaWorld(seed=5, job_count=1, pods_per_job=2, cards_per_pod=0)
    alaya.gpu_names = ["G" * 100_000, long_prefix + "a", long_prefix + "b", "card-3"]
    job_id = next(iter(alaya.jobs))
    alaya.faults.append(AlayaFault("odd_numbers", job=job_id, pod="worker-0", type="gpu"))
    return Simulator(seed=5, aihc=world, alaya=alaya)


def _config(case: Case, url: str) -> dict[str, Any]:
    assert case.simulator.alaya is not None
    aihc = {
        "name": "hostile",
        "endpoint": url,
        "access_key_id": DEMO_ACCESS_KEY_ID,
        "secret_access_key": DEMO_SECRET_ACCESS_KEY,
        "resource_pool_id": POOL,
        "limits": {"requests_per_second": "unlimited", "retries": 0, "timeout": "60s"},
        **case.aihc,
    }
    config: dict[str, Any] = {
        "web": {"listen_address": "127.0.0.1:0"},
        "poll_interval": "1h",
        "log": {"level": "error"},
        "aihc": [aihc],
    }
    if case.alaya:
        jobs = [{"id": j, "pods": pods} for j, pods in case.simulator.alaya.jobs.items()]
        config["alaya"] = [
            {
                "name": "hostile-alaya",
                "endpoint": url,
                "api_key": DEMO_API_KEY,
                "jobs": jobs,
                "limits": {"requests_per_second": "unlimited", "retries": 0},
            }
        ]
    return config


async def _listening(process: asyncio.subprocess.Process, timeout: float = 60.0) -> str:
    """The base URL of the exporter `process`, told to listen on port 0, once it does."""
    deadline = time.monotonic() + timeout
    while not (ports := listening_ports(process.pid)):
        if process.returncode is not None or time.monotonic() > deadline:
            raise RuntimeError(f"exporter did not listen (exit {process.returncode})")
        await asyncio.sleep(0.05)
    return f"http://127.0.0.1:{ports[0]}"


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


async def run_case(case: Case, checkout: Path, rss_kill_mib: float = 2048) -> Outcome:
    """Serve `case`'s simulator, run `checkout`'s exporter until its first poll is over (or
    its RSS passes `rss_kill_mib`), and read what it exports."""
    async with running(case.simulator) as served:
        with tempfile.TemporaryDirectory(prefix="hostile-") as directory:
            path = Path(directory, "exporter.yaml")
            path.write_text(yaml.safe_dump(_config(case, served.url)), encoding="utf-8")
            env = {k: v for k, v in os.environ.items() if not k.startswith("TJE_")}
            env["PYTHONPATH"] = str(checkout)
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "exporter",
                "--config",
                str(path),
                cwd=checkout,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                return await _observe(process, await _listening(process), rss_kill_mib)
            finally:
                if process.returncode is None:
                    process.terminate()
                    try:
                        await asyncio.wait_for(process.wait(), 10)
                    except TimeoutError:
                        process.kill()
                        await process.wait()


async def _observe(process: asyncio.subprocess.Process, base: str, rss_kill_mib: float) -> Outcome:
    started = time.monotonic()
    pid = process.pid
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            if process.returncode is not None:
                raise RuntimeError(f"exporter exited with {process.returncode}")
            rss = _status_kib(pid, "VmRSS") / 1024
            if rss > rss_kill_mib:
                peak = _status_kib(pid, "VmHWM") / 1024
                process.kill()
                await process.wait()
                return Outcome(peak, rss, time.monotonic() - started, killed=True)
            try:
                async with session.get(f"{base}/-/ready") as resp:
                    if resp.status == 200:
                        break
            except (aiohttp.ClientError, TimeoutError):
                pass
            if time.monotonic() - started > 300:
                raise RuntimeError("no first poll within 300 s")
            await asyncio.sleep(0.05)
        seconds = time.monotonic() - started
        async with session.get(f"{base}/metrics") as resp:
            text = await resp.text()
    outcome = Outcome(
        _status_kib(pid, "VmHWM") / 1024, _status_kib(pid, "VmRSS") / 1024, seconds, False, text
    )
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            outcome.samples.append((sample.name, dict(sample.labels), sample.value))
    return outcome


def promtool(text: str) -> tuple[int, str]:
    """(exit code, first line of output) of `promtool check metrics` on `text`."""
    tool = shutil.which("promtool")
    if tool is None:
        return -1, "promtool not installed"
    done = subprocess.run(
        [tool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )
    first = (done.stdout + done.stderr).decode(errors="replace").strip().splitlines()
    return done.returncode, first[0] if first else ""


def report(case: Case, outcome: Outcome) -> list[str]:
    name = case.name
    lines = [
        f"{name} peak_rss_MiB={outcome.peak_rss_mib:.0f} rss_MiB={outcome.rss_mib:.0f} "
        f"first_poll_s={outcome.seconds:.1f} killed={outcome.killed}"
    ]
    if outcome.killed:
        return lines
    up = {
        labels["target"]: value
        for metric, labels, value in outcome.samples
        if metric == "training_exporter_up"
    }
    codes = {
        labels["code"]: int(value)
        for metric, labels, value in outcome.samples
        if metric == "training_exporter_api_requests_total" and labels["endpoint"] == METRICS
    }
    lines.append(f"{name} up={up} {METRICS}_codes={codes}")
    if name == "nested" or name == "baseline":
        assert case.simulator.aihc is not None
        per_job = {
            job_id[-4:]: outcome.count(_of_job(job_id, "training_"))
            for job_id in case.simulator.aihc.jobs
        }
        gpu = {
            job_id[-4:]: outcome.count(_of_job(job_id, "training_pod_gpu_utilization_ratio"))
            for job_id in case.simulator.aihc.jobs
        }
        lines.append(f"{name} series_per_job={per_job} gpu_series_per_job={gpu}")
    if name == "strings":
        drops = {
            f"{labels['provider']}:{labels['reason']}": int(value)
            for metric, labels, value in outcome.samples
            if metric == "training_exporter_dropped_values_total"
        }
        longest = max(
            (len(v) for _, labels, _ in outcome.samples for v in labels.values()), default=0
        )
        pods = sorted(
            {
                labels["pod"][:12]
                for metric, labels, _ in outcome.samples
                if metric == "training_pod_info" and labels.get("pod", "").startswith("pod-")
            }
        )
        ratios = [
            value
            for metric, labels, value in outcome.samples
            if metric.startswith("training_pod_gpu_utilization") and labels["pod"] == "worker-0"
        ]
        code, first = promtool(outcome.text)
        lines += [
            f"{name} duplicate_series={outcome.duplicates()} longest_label={longest} "
            f"exposition_bytes={len(outcome.text.encode())}",
            f"{name} promtool_rc={code} promtool={first[:120]!r}",
            f"{name} pods_beside_an_invalid_byte={pods}",
            f"{name} alaya_worker0_gpu_ratios_min={min(ratios, default=None)} "
            f"max={max(ratios, default=None)}",
            f"{name} dropped={drops}",
        ]
    return lines


async def amain(args: argparse.Namespace) -> int:
    checkout = Path(args.checkout).resolve()
    print(f"info checkout={checkout} rss_kill_MiB={args.rss_kill_mib}")
    only = set(args.cases.split(",")) if args.cases else None
    for case in cases(only):
        outcome = await run_case(case, checkout, args.rss_kill_mib)
        for line in report(case, outcome):
            print(line, flush=True)
    return 0


def _of_job(job_id: str, prefix: str) -> Callable[[str, dict[str, str]], bool]:
    """Samples of `job_id` whose name starts with `prefix`."""
    return lambda name, labels: name.startswith(prefix) and labels.get("job_id") == job_id


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--checkout", default=str(REPO), help="the exporter to run")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument(
        "--rss-kill-mib", type=float, default=2048, help="kill the exporter past this RSS"
    )
    return asyncio.run(amain(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
