"""A third provider, registered from its own folder by an entry point, runs end to end
through the command line: the simulator serves its fake, the exporter reads `fake:` from its
configuration, resolves its token from TJE_FAKE_TOKEN, polls over HTTP and exports /metrics.
Nothing outside this folder names it."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.providers.registry import ENTRY_POINT_GROUP
from tests.conftest import REPO, bound_url, cli_env
from tests.providers.fake.server import TOKEN, FakeWorld

SEED = 42


def installed_plugin(directory: Path) -> Path:
    """A distribution whose only content is the entry point: how a third party installs one."""
    info = directory / "fake_provider-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-provider\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nfake = tests.providers.fake.provider:PROVIDER\n"
    )
    return directory


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    plugins = installed_plugin(tmp_path / "site")
    return cli_env(PYTHONPATH=f"{plugins}:{REPO}", TJE_FAKE_TOKEN=TOKEN)


@pytest.fixture
def simulator_url(plugin_env: dict[str, str]) -> Iterator[str]:
    command = ["simulate", "--listen", "127.0.0.1:0", "--seed", str(SEED)]
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", *command],
        cwd=REPO,
        env=plugin_env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("simulator listening on "), first
        greeting = [process.stdout.readline() for _ in range(4)]
        assert any(line.strip().startswith("Fake: token") for line in greeting), greeting
        yield first.removeprefix("simulator listening on ").strip()
    finally:
        process.terminate()
        process.wait(10)
        if process.stdout:
            process.stdout.close()


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_provider_from_its_own_folder_is_polled_over_http_and_exported(
    tmp_path: Path, plugin_env: dict[str, str], simulator_url: str
) -> None:
    config = tmp_path / "exporter.yaml"
    config.write_text(
        "web:\n  listen_address: 127.0.0.1:0\n"
        "poll_interval: 1s\n"
        "fake:\n"
        f"  - name: plugged\n    endpoint: {simulator_url}\n"
        "    limits: {requests_per_second: unlimited}\n"
    )
    log = tmp_path / "exporter.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "exporter", "--config", str(config)],
            cwd=REPO,
            env=plugin_env,
            stdout=sink,
            stderr=sink,
        )
    world = FakeWorld.seeded(SEED)
    expected = {
        frozenset(
            {
                ("provider", "fake"),
                ("resource_pool", ""),
                ("queue", ""),
                ("job_id", job_id),
                ("pod", pod),
            }
        ): gpu
        for job_id, (_, pods) in world.jobs.items()
        for pod, gpu in pods.items()
    }
    try:
        deadline = time.monotonic() + 30
        while (url := bound_url(log)) is None:
            assert time.monotonic() < deadline and process.poll() is None, log.read_text()
            time.sleep(0.05)
        while True:
            series = scrape(url)
            loads = {
                labels: value
                for (name, labels), value in series.items()
                if name == "training_pod_gpu_utilization_ratio"
            }
            if loads == expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert loads == expected, log.read_text()
        up = series[
            ("training_exporter_up", frozenset({("provider", "fake"), ("target", "plugged")}))
        ]
        assert up == 1.0
        statuses = {
            dict(labels)["job_id"]
            for (name, labels), value in series.items()
            if name == "training_job_status" and dict(labels)["status"] == "Running" and value == 1
        }
        assert statuses == set(world.jobs)
        with urllib.request.urlopen(f"{url}/", timeout=5) as reply:
            page = reply.read().decode()
        assert "the fake cloud of the tests" in page and "plugged" in page
    finally:
        process.terminate()
        process.wait(10)
    assert process.returncode == 0, log.read_text()


def test_without_the_entry_point_the_key_is_refused(tmp_path: Path) -> None:
    # The same file, in a process that has not installed the plugin: `fake` is no key.
    config = tmp_path / "exporter.yaml"
    config.write_text("fake:\n  - name: plugged\n    endpoint: http://127.0.0.1:1\n")
    result = subprocess.run(
        [sys.executable, "-m", "exporter", "--config", str(config)],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "fake" in result.stderr
