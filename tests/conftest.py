"""Shared fixtures (the simulator over real HTTP, the CLI as a real subprocess) and how the
suite is spread over pytest-xdist workers (`tests.scheduling`): long tests first, more workers
than cores."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from exporter.cli import main as cli_main
from exporter.simulator import RunningSimulator, Simulator, running
from tests.scheduling import GroupScheduling

REPO = Path(__file__).resolve().parent.parent


def keep_bytecode() -> None:
    """Where writing bytecode is off (PYTHONDONTWRITEBYTECODE, as in the Dockerfile and many
    CI images), write it under a cache directory of this user's outside the tree instead, for
    this process and the ones it starts: otherwise every xdist worker compiles the package and
    rewrites every test module's asserts afresh (4 of its 6 CPU-s of collection), and every
    exporter, simulator and benchmark process the tests start compiles the package again
    (0.1 CPU-s each). A cache directory the user set (PYTHONPYCACHEPREFIX) is kept."""
    if not sys.dont_write_bytecode or sys.pycache_prefix:
        return
    cache = Path(tempfile.gettempdir()) / f"training-job-exporter-pycache-{os.getuid()}"
    try:
        cache.mkdir(mode=0o700, exist_ok=True)
        if cache.lstat().st_uid != os.getuid() or cache.is_symlink():
            return
    except OSError:
        return
    sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


keep_bytecode()


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


def run_in_process(*args: str) -> int:
    """The exit code of the command line's entry point (exporter.cli:main, the
    training-job-exporter script) run in this process, argparse's exit as its code; what it
    prints is the test's to capture (capsys). Only for input it refuses before it sets anything
    up (logging, the redactor's secrets), so nothing of it stays in the test's process."""
    try:
        return cli_main(list(args))
    except SystemExit as exc:
        assert isinstance(exc.code, int), exc.code
        return exc.code


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


# What the exporter logs in its console format (`make demo`, the deploy tests) once it has bound
# 127.0.0.1:0: the port it got.
EXPORTER_BOUND = re.compile(r"\blistening\b.* bound=\['127\.0\.0\.1:(\d+)'\]")


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


def pytest_configure(config: pytest.Config) -> None:
    """Hypothesis works out its tables of Unicode characters once per checkout and keeps them
    in `.hypothesis/` (3-4 CPU-s); in a fresh clone every xdist worker would work them out at
    the same time. The controller draws a text example first, so the workers read them."""
    if hasattr(config, "workerinput"):
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st.text().example()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> GroupScheduling | None:
    """`--dist loadgroup` (pyproject.toml): `tests.scheduling.GroupScheduling`."""
    if config.getvalue("dist") != "loadgroup":
        return None
    return GroupScheduling(config, log)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject.toml): two workers per usable core, and one more."""
    return WORKERS_PER_CORE * len(os.sched_getaffinity(0)) + SPARE_WORKERS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` come first, in their collection order: each starts on a worker
    while the short ones fill the others, instead of one ending the run alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
