"""Shared fixtures: the simulator over real HTTP, and the CLI as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from exporter.simulator import RunningSimulator, Simulator, running

REPO = Path(__file__).resolve().parent.parent


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for running this checkout's exporter in a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TJE_")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def run_cli(
    *args: str, timeout: float = 30, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
        env=env or cli_env(),
    )


@pytest.fixture
def simulator() -> Simulator:
    return Simulator(seed=7)


@pytest.fixture
async def served_simulator(simulator: Simulator) -> AsyncIterator[RunningSimulator]:
    async with running(simulator) as served:
        yield served
