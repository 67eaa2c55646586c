"""50,000 listed jobs: the job cap applies before any per-job call, the process stays
responsive (health and /metrics under 2 s), its memory bounded, and SIGTERM stops it cleanly.

Simulator and exporter each run as their own process, so the latencies and the RSS are the
exporter's alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from tests.conftest import REPO, bound_url, cli_env, start_exporter

JOBS = 50_000
MAX_JOBS = 2_000
# Measured: 153-155 MiB at the end of the run (50 pages of 1,000 jobs parsed, 2,000 jobs
# exported); without the cap and the worker pool, 3.1 GiB.
MAX_RSS_MIB = 400
# The slowest reply to a probe: 0.3 s alone; 1.2-1.4 s with the rest of the suite on the
# 2 cores beside it (the simulator paging 50,000 jobs is in this test's share too).
MAX_LATENCY = 2.0


def start(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as sink:
        return subprocess.Popen(command, cwd=REPO, env=cli_env(), stdout=sink, stderr=sink)


def wait_for_line(log: Path, predicate, timeout: float = 60) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text().splitlines():
            if predicate(line):
                return line
        time.sleep(0.05)
    raise AssertionError(log.read_text()[-3000:])


def timed_get(url: str) -> tuple[float, bytes]:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as reply:
        body: bytes = reply.read()
    return time.monotonic() - started, body


def read_metrics(body: bytes) -> tuple[float, set[str]]:
    """The jobs left out so far, and the jobs a scrape exports."""
    left_out = 0.0
    exported: set[str] = set()
    for text in body.decode().splitlines():
        if text.startswith("training_exporter_jobs_left_out_total{"):
            left_out = float(text.rsplit(" ", 1)[1])
        elif text.startswith("training_job_info{"):
            exported.add(text.split('job_id="', 1)[1].split('"', 1)[0])
    return left_out, exported


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_fifty_thousand_listed_jobs_keep_the_exporter_responsive_and_bounded(
    tmp_path: Path,
) -> None:
    sim_log = tmp_path / "simulator.log"
    simulator = start(
        [sys.executable, "-m", "exporter", "simulate", "--listen", "127.0.0.1:0",
         "--aihc-jobs", str(JOBS), "--aihc-pods", "1"],
        sim_log,
    )  # fmt: skip
    try:
        line = wait_for_line(sim_log, lambda text: "listening on " in text)
        url = line.split("listening on ", 1)[1].strip()
        config = {
            # One round for the whole test: its listing of the 50 pages, then the warm-up
            # reads at the full budget. A round shorter than the listing (5 s, with the
            # listing at 10-30 s) only started listing the 50 pages again as the first
            # listing ended.
            "poll_interval": "60s",
            "web": {"listen_address": "127.0.0.1:0"},
            "aihc": [
                {
                    "name": "big",
                    "endpoint": url,
                    "access_key_id": DEMO_ACCESS_KEY_ID,
                    "secret_access_key": DEMO_SECRET_ACCESS_KEY,
                    "resource_pool_id": DEMO_RESOURCE_POOL,
                    "page_size": 1000,
                    "max_jobs": MAX_JOBS,
                    "metric_types": ["GpuUsage"],
                    "events": False,
                    "limits": {"requests_per_second": 200, "max_concurrency": 8},
                }
            ],
        }
        path = tmp_path / "exporter.yaml"
        path.write_text(yaml.safe_dump(config))
        exporter_log = tmp_path / "exporter.log"
        exporter = start_exporter(path, exporter_log)
        try:
            wait_for_line(exporter_log, lambda text: '"listening"' in text)
            base = bound_url(exporter_log)
            assert base is not None
            worst = {"/-/healthy": 0.0, "/metrics": 0.0}
            left_out = 0.0
            exported: set[str] = set()
            # Probed from the start until a round has exported the capped set.
            deadline = time.monotonic() + 60
            while not (left_out >= JOBS - MAX_JOBS and len(exported) == MAX_JOBS):
                assert time.monotonic() < deadline, (worst, left_out, len(exported))
                for route in worst:
                    took, body = timed_get(base + route)
                    worst[route] = max(worst[route], took)
                    if route == "/metrics":
                        left_out, exported = read_metrics(body)
                        assert len(exported) <= MAX_JOBS
                time.sleep(0.1)
            rss = rss_mib(exporter.pid)
            print(f"worst latency {worst}; RSS {rss:.0f} MiB; jobs left out {left_out:.0f}")
            assert max(worst.values()) < MAX_LATENCY, worst
            assert rss < MAX_RSS_MIB
            stopped = time.monotonic()
            exporter.send_signal(signal.SIGTERM)
            assert exporter.wait(10) == 0
            assert time.monotonic() - stopped < 5
            assert "Traceback" not in exporter_log.read_text()
        finally:
            if exporter.poll() is None:
                exporter.kill()
                exporter.wait(10)
    finally:
        simulator.terminate()
        simulator.wait(10)
