"""Shared fixtures (the simulator over real HTTP, the CLI as a real subprocess) and how the
suite is spread over pytest-xdist workers: long tests first, more workers than cores."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadGroupScheduling

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


def start_exporter(
    config: Path, log: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """This checkout's exporter as a process on `config`, its log lines (JSON) in `log`."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "exporter", "--config", str(config), *args],
            cwd=REPO,
            env=env or cli_env(),
            stdout=sink,
            stderr=sink,
        )


async def listening(process: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> str:
    """The address of an exporter `start_exporter` started, once its log says it listens."""
    deadline = time.monotonic() + timeout
    while (base := bound_url(log)) is None:
        assert time.monotonic() < deadline and process.poll() is None, log.read_text()
        await asyncio.sleep(0.05)
    return base


def bound_url(log: Path) -> str | None:
    """The exporter's address once its log says it listens (it binds port 0)."""
    for line in log.read_text().splitlines():
        event = json.loads(line)
        if event.get("event") == "listening":
            return f"http://{event['bound'][0]}"
    return None


@pytest.fixture
def simulator() -> Simulator:
    return Simulator(seed=7)


@pytest.fixture
async def served_simulator(simulator: Simulator) -> AsyncIterator[RunningSimulator]:
    async with running(simulator) as served:
        yield served


# Workers per core, and one more: most tests wait on sockets and subprocesses, not on a core,
# and a few (a real Prometheus evaluating rules, an exporter on a sped-up clock) hold a worker
# for 15-20 s while they wait. On 2 cores: 4 workers 136 s, 5 workers 125 s, 6 workers 127 s.
WORKERS_PER_CORE = 2
SPARE_WORKERS = 1

# Tests that run on one worker, one after another, by the start of their node id:
# - a module whose module or session fixture is expensive sets it up once (`make demo`; a
#   real Prometheus scraping the demo; a headless Chromium), not once per worker;
# - "heavy": tests that load both cores for seconds and bound a latency, a pace or a wait
#   (the soak, 50,000 jobs, the benchmarks' smoke runs, 200 calls at 20/s), in turn on one
#   worker while the others run the short tests. Four at once starved each other (the
#   soak's live set took over 30 s to show, the 50,000-job exporter's /-/healthy 1.4 s);
#   two at once each took nearly twice as long as alone (17 -> 31 s).
# (`pytest.mark.xdist_group` does not group with pytest 9: xdist 3.8 renames item._nodeid,
# which pytest 9's nodeid no longer reads.)
GROUPS = {
    "tests/test_demo.py::": "demo",
    "tests/deploy/test_deploy_e2e_prometheus.py::": "prometheus-e2e",
    "tests/deploy/test_deploy_ranks_e2e.py::": "prometheus-ranks-e2e",
    "tests/web/test_status_browser.py::": "browser",
    "tests/test_soak.py::": "heavy",
    "tests/work/test_bounded_work.py::test_fifty_thousand": "heavy",
    "tests/bench/": "heavy",
    "tests/test_rate_budget.py::test_twenty_per_second": "heavy",
}


def group_of(nodeid: str) -> str | None:
    return next((g for prefix, g in GROUPS.items() if nodeid.startswith(prefix)), None)


class _GroupScheduling(LoadGroupScheduling):
    """`--dist loadgroup`, whose groups are GROUPS; every other test is a unit of its own.
    Units go out largest first (the groups), then in collection order."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid) or super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadGroupScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    return _GroupScheduling(config, log)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject.toml): two workers per usable core, and one more."""
    return WORKERS_PER_CORE * len(os.sched_getaffinity(0)) + SPARE_WORKERS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` come first, in their collection order: each starts on a worker
    while the short ones fill the others, instead of one ending the run alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
