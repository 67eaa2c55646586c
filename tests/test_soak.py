"""The soak in CI: an hour and a half simulated of `python -m bench.soak`, every check met.

The benchmark runs the exporter as shipped (its CLI, its own process) beside the simulator,
both on one clock libfaketime speeds up 60 times, through every fault of the chaos schedule
(bench/README.md has the checks and a simulated day's figures). 1.5 hours at 60 x take about
95 s, the suite's longest test; each fault still gets its own slot of 6.5 simulated minutes
(`bench.soak.schedule`). The run's output is printed; the test fails when any check is
missed but steadiness.
Not faster: at 100 x, a 0.6 s stall of the exporter beside the parallel suite on 2 cores is
a whole timeout (60 s), and its target goes down outside any fault; at 60 x a timeout is a
second of real time.

Steadiness (scrape p99 and CPU, first hour against last) is printed, not asserted here: in
so short a run an hour's p99 rests on about a hundred scrapes, so one scrape slowed by the
parallel suite beside it decides it (2 of 4 full runs missed it on one day, with the p50 and
the exporter's CPU flat). The day-long `python -m bench.soak` holds it to its goal.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO, cli_env

HOURS, SPEED = 1.5, 60


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_simulated_hours_under_chaos_meet_every_check() -> None:
    command = [sys.executable, "-m", "bench.soak", "--hours", str(HOURS), "--speed", str(SPEED)]
    result = subprocess.run(
        command, cwd=REPO, env=cli_env(), capture_output=True, text=True, timeout=280
    )
    print(result.stdout)
    missed = missed_checks(result.stdout)
    assert result.returncode in (0, 1), result.stdout[-8000:] + result.stderr[-4000:]
    assert "steadiness: exporter CPU" in result.stdout, result.stdout[-8000:]
    assert [m for m in missed if not m.startswith("steadiness:")] == [], result.stdout[-8000:]
    assert result.returncode == 0 or missed, result.stdout[-8000:] + result.stderr[-4000:]


def missed_checks(out: str) -> list[str]:
    """The names of the checks whose goal line says MISSED (a check is its figure line, then
    its goal line)."""
    lines = out.splitlines()
    return [
        lines[i - 1].strip().split("  ")[0]
        for i, line in enumerate(lines)
        if i and line.strip().startswith("goal ") and line.rstrip().endswith(": MISSED")
    ]
