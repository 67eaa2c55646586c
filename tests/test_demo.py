"""The README's first command, run as a newcomer would: it serves the demo, both providers.

How soon it does is a benchmark's figure (`python -m bench.startup`), not a deadline here: on a
shared, loaded machine the parallel suite cannot say how long a start may take. These tests
wait for the demo itself (a scrape with every provider's data, or the process ending), bounded
only by the suite's hang guard (pytest-timeout's 300 s).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import EXPORTER_BOUND, REPO, cli_env


def readme_demo_command() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.*?)```", readme, re.S)[0].strip()


@dataclass
class Demo:
    process: subprocess.Popen[str]
    url: str
    # What the demo printed up to its listening line, read to find its port.
    early: str = ""

    def get(self, path: str = "/metrics") -> str:
        with urllib.request.urlopen(self.url + path, timeout=5) as resp:
            return str(resp.read().decode())


def scrape_when(demo: Demo, predicate) -> str:  # type: ignore[no-untyped-def]
    """The first scrape `predicate` accepts; the last one if the demo stopped first."""
    text = ""
    while True:
        if demo.process.poll() is not None:
            break
        try:
            text = demo.get()
            if predicate(text):
                return text
        except OSError:
            pass
        time.sleep(0.5)
    return text


def logged_port(process: subprocess.Popen[str]) -> tuple[int, str]:
    """The port the exporter, told to listen on 127.0.0.1:0, says it bound, and its output up
    to that line, which this reads (the demo's simulator listens in the same process)."""
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if found := EXPORTER_BOUND.search(line):
            return int(found[1]), "".join(seen)
    pytest.fail("the demo exited before it listened:\n" + "".join(seen[-30:]))


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    command = readme_demo_command().split()
    process = subprocess.Popen(
        [*command, "ARGS=--web.listen-address 127.0.0.1:0"],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        port, early = logged_port(process)
        yield Demo(process, f"http://127.0.0.1:{port}", early)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        if process.stdout:
            process.stdout.close()


def has_everything(text: str) -> bool:
    """Both providers' data, and both targets up: their first full read is in."""
    lines = text.splitlines()
    ups = [line for line in lines if line.startswith("training_exporter_up{")]
    if len(ups) != 2 or not all(line.endswith(" 1.0") for line in ups):
        return False
    needed = [
        "training_job_status{",
        "training_pod_phase{",
        "training_pod_gpu_utilization_ratio{",
    ]
    return all(
        any(n in line and f'provider="{p}"' in line for line in text.splitlines())
        for n in needed[1:]
        for p in ("aihc", "alaya")
    ) and any(needed[0] in line and 'provider="aihc"' in line for line in text.splitlines())


def test_first_command_serves_both_providers(demo: Demo) -> None:
    text = scrape_when(demo, has_everything)
    assert has_everything(text), text[-3000:]
    families = {f.name: f for f in text_string_to_metric_families(text)}
    up = {s.labels["provider"]: s.value for s in families["training_exporter_up"].samples}
    assert up == {"aihc": 1.0, "alaya": 1.0}
    assert "training_pod_gpu_memory_utilization_ratio" in families
    assert any("gpu" in s.labels for s in families["training_pod_gpu_utilization_ratio"].samples)


def test_promtool_check_metrics_is_silent_on_the_demo(demo: Demo) -> None:
    text = scrape_when(demo, has_everything)
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == "", (
        result.stdout + result.stderr
    )


def test_ready_and_landing_name_targets_without_secrets(demo: Demo) -> None:
    scrape_when(demo, has_everything)
    assert demo.get("/-/ready").startswith("Ready")
    page = demo.get("/")
    assert "demo-aihc" in page and "demo-alaya" in page
    from exporter.simulator.aihc import DEMO_SECRET_ACCESS_KEY
    from exporter.simulator.alaya import DEMO_API_KEY

    assert DEMO_SECRET_ACCESS_KEY not in page and DEMO_API_KEY not in page


def test_sigterm_stops_within_5s(demo: Demo) -> None:
    scrape_when(demo, has_everything)
    os.killpg(demo.process.pid, signal.SIGTERM)
    started = time.monotonic()
    demo.process.wait(10)
    assert time.monotonic() - started < 5
    # All it printed: the jobs file's line may come before the listening line or after it.
    output = demo.early + (demo.process.stdout.read() if demo.process.stdout else "")
    assert "Traceback" not in output
    assert "stopping" in output
    # The demo's jobs file goes with it (make may exit before its python child is done).
    jobs_file = re.search(r"path=(\S+alaya-jobs\.yaml)", output)
    assert jobs_file is not None, output
    directory = Path(jobs_file.group(1)).parent
    deadline = time.monotonic() + 5
    while directory.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not directory.exists()


async def test_the_demo_jobs_file_turns_over_and_is_removed_on_exit(
    aiohttp_client: Callable[..., Any],
) -> None:
    from exporter.config import Limits, Settings
    from exporter.demo import start_demo_targets
    from exporter.server import build_app

    alaya_jobs: list[frozenset[str]] = []
    async with AsyncExitStack() as stack:
        # As the CLI starts it: the demo's services, then its targets added to the settings.
        settings = Settings(poll_interval=0.3)
        settings = (await start_demo_targets(settings, stack, rotate_every=0.6))(settings)
        # Only the Alaya target, one unbudgeted call per pod: a 0.3 s poll stays under 0.3 s.
        quick = {"limits": Limits(requests_per_second=0), "types": ["cpu"], "pod_details": False}
        [alaya] = settings.alaya
        settings = settings.model_copy(
            update={"aihc": [], "alaya": [alaya.model_copy(update=quick)]}
        )
        path = alaya.jobs_file
        assert path is not None and path.exists()
        client = await aiohttp_client(build_app(settings))
        deadline = time.monotonic() + 20
        while len(alaya_jobs) < 3 and time.monotonic() < deadline:
            text = await (await client.get("/metrics")).text()
            jobs = frozenset(
                s.labels["job_id"]
                for f in text_string_to_metric_families(text)
                if f.name == "training_pod_cpu_utilization_ratio"
                for s in f.samples
                if s.labels["provider"] == "alaya"
            )
            # A job that left goes at the listing, the one that came follows its first read:
            # between the two, one job alone is shown; the file always names two.
            if len(jobs) == 2 and (not alaya_jobs or jobs != alaya_jobs[-1]):
                alaya_jobs.append(jobs)
            await asyncio.sleep(0.05)
        await client.close()
    assert len(alaya_jobs) == 3, alaya_jobs
    first, second, third = alaya_jobs
    # One job stays; at each turn one appears and another goes.
    assert len(first) == len(second) == 2
    assert len(first & second) == 1 and first == third
    assert not path.parent.exists()
