"""Shared fixtures: the simulator over real HTTP, and the CLI as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from exporter.collector import Exposition, Payload
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


def start_exporter(config: Path, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """This checkout's exporter as a process on `config`, its log lines (JSON) in `log`."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "exporter", "--config", str(config), *args],
            cwd=REPO,
            env=cli_env(),
            stdout=sink,
            stderr=sink,
        )


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


@pytest.fixture(autouse=True)
def scrapes_read_what_was_polled(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An in-process scrape waits for the rendering of the store as it is, so that a test
    that polls and then scrapes sees its poll. The exporter never waits: tests marked
    `scrapes_as_exporter` keep that (tests/test_scrape_reply.py)."""
    if request.node.get_closest_marker("scrapes_as_exporter"):
        return
    served = Exposition.payload

    async def payload(self: Exposition, accept: str, gzip: bool) -> Payload:
        await self.current()
        return await served(self, accept, gzip)

    monkeypatch.setattr(Exposition, "payload", payload)
