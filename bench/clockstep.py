"""A wall-clock step of +2 h under a running exporter (issue 19): what series does it drop?

The exporter (from `--checkout`) and the simulator run under libfaketime with one offset read
from a file at every call and the monotonic clock left alone, as an NTP correction or a
resumed VM would leave it (the simulator steps too: a real service's clock does not move, but
then the exporter's was off before, and AIHC refuses signatures 30 minutes off). AIHC, 20
jobs x 2 pods, `poll_interval: 10s`; once every pod has its GPU series,
the file steps the wall clock forward 2 h. Printed: GPU-utilisation series before the step
and the fewest seen in the 30 s after (goal: as many), from the exporter's own /metrics.

    python -m bench.clockstep [--checkout PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from bench.budget import ROOT
from bench.scratch import scratch
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
SERIES = "training_pod_gpu_utilization_ratio{"
SIZE = ("--aihc-jobs", "20", "--aihc-pods", "2")


def gpu_series(url: str) -> int:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as reply:
        return sum(line.startswith(SERIES) for line in reply.read().decode().splitlines())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--checkout", type=Path, default=ROOT, help="the exporter to measure")
    args = p.parse_args()
    workdir = scratch("bench-clockstep-")
    target = {
        "name": "bench",
        "endpoint": "",
        "access_key_id": DEMO_ACCESS_KEY_ID,
        "secret_access_key": DEMO_SECRET_ACCESS_KEY,
        "resource_pool_id": DEMO_RESOURCE_POOL,
        "metric_types": ["GpuUsage"],
        "events": False,
    }
    config = workdir / "exporter.yaml"
    offset = workdir / "offset"
    offset.write_text("+0\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TJE_")}
    env.update(
        PYTHONPATH=str(args.checkout),
        LD_PRELOAD=LIBFAKETIME,
        FAKETIME_TIMESTAMP_FILE=str(offset),
        FAKETIME_NO_CACHE="1",
        FAKETIME_DONT_FAKE_MONOTONIC="1",
    )
    simulator = subprocess.Popen(
        [sys.executable, "-m", "exporter", "simulate", "--listen", "127.0.0.1:0", *SIZE],
        cwd=ROOT,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert simulator.stdout is not None
    url = simulator.stdout.readline().split("listening on ", 1)[1].strip()
    target["endpoint"] = url
    config.write_text(
        yaml.safe_dump(
            {"poll_interval": "10s", "web": {"listen_address": "127.0.0.1:0"}, "aihc": [target]}
        )
    )
    log = workdir / "exporter.log"
    with log.open("wb") as sink:
        command = [sys.executable, "-m", "exporter", "--config", str(config)]
        exporter = subprocess.Popen(command, cwd=args.checkout, env=env, stderr=sink)
    try:
        base = ""
        while not base and exporter.poll() is None:
            time.sleep(0.1)
            for line in log.read_text().splitlines():
                if '"listening"' in line:
                    base = f"http://{json.loads(line)['bound'][0]}"
        while gpu_series(base) < 40:
            time.sleep(1)
        time.sleep(5)
        before = gpu_series(base)
        offset.write_text("+7200\n")
        fewest = before
        until = time.monotonic() + 30
        while time.monotonic() < until:
            fewest = min(fewest, gpu_series(base))
            time.sleep(0.5)
    finally:
        exporter.terminate()
        exporter.wait(20)
        simulator.terminate()
        simulator.communicate(timeout=30)
    met = "met" if fewest == before else "MISSED"
    print(f"clockstep gpu_series_before={before} fewest_in_30s_after_+2h={fewest} {met}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
