"""How long the demo takes from its start to a scrape with both providers' data.

The README's first command runs the exporter on its built-in demo (`python -m exporter --demo`,
what `make demo` runs): this measures, from the process start, the first `/metrics` scrape
that holds both targets up and both providers' job, pod and GPU series. The peer, measured in
the same run, is the interpreter starting and importing the exporter's command line and its
configuration (what any start pays): the figure is the ratio of the two, as the machine is shared.

    python -m bench.startup [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from bench.ports import free_port

ROOT = Path(__file__).resolve().parent.parent
DEADLINE = 120.0
NEEDED = ("training_job_status{", "training_pod_phase{", "training_pod_gpu_utilization_ratio{")


def serves_everything(text: str) -> bool:
    ups = [line for line in text.splitlines() if line.startswith("training_exporter_up{")]
    if len(ups) != 2 or not all(line.endswith(" 1.0") for line in ups):
        return False
    return all(
        any(name in line and f'provider="{p}"' in line for line in text.splitlines())
        for name in NEEDED[1:]
        for p in ("aihc", "alaya")
    )


def env() -> dict[str, str]:
    found = {k: v for k, v in os.environ.items() if not k.startswith("TJE_")}
    found["PYTHONPATH"] = str(ROOT)
    return found


def demo_start() -> float:
    """Seconds from the demo's start to its first scrape with everything."""
    port = free_port()
    started = time.monotonic()
    command = [sys.executable, "-m", "exporter", "--demo", "--log.level", "warning"]
    process = subprocess.Popen(
        [*command, "--web.listen-address", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while time.monotonic() - started < DEADLINE:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    if serves_everything(r.read().decode()):
                        return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.05)
        raise SystemExit(f"the demo served nothing complete in {DEADLINE:.0f} s")
    finally:
        process.terminate()
        process.wait(10)


def import_start() -> float:
    """Seconds for the interpreter to start and import the command line and the configuration
    (`exporter.cli` loads it once the flags are parsed): the floor."""
    started = time.monotonic()
    code = "import exporter.cli, exporter.config"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env(), check=True)
    return time.monotonic() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    demo, floor = [], []
    for _ in range(args.repeats):
        floor.append(import_start())
        demo.append(demo_start())
    d, f = statistics.median(demo), statistics.median(floor)
    print(f"startup demo_to_both_providers_s={d:.2f} runs={[round(x, 2) for x in demo]}")
    print(f"startup floor_interpreter_and_imports_s={f:.2f} ratio={d / f:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
