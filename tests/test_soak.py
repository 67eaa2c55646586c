"""The soak in CI: two simulated hours of `python -m bench.soak`, every check met.

The benchmark runs the exporter as shipped (its CLI, its own process) beside the simulator,
both on one clock libfaketime speeds up 150 times, through every fault of the chaos schedule
(bench/README.md has the checks and a simulated day's figures). Two hours at 150 x take about
50 s; the run's output is printed, the test fails when any check is missed.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

HOURS, SPEED = 2, 150


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_two_simulated_hours_under_chaos_meet_every_check() -> None:
    command = [sys.executable, "-m", "bench.soak", "--hours", str(HOURS), "--speed", str(SPEED)]
    result = subprocess.run(
        command, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=170
    )
    print(result.stdout)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-4000:]
