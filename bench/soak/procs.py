"""The soak's two processes, each on the shared clock: the simulator and the exporter as shipped.

The exporter runs from its CLI with a configuration file and secret files the soak rewrites
(a rotation, a bad file then a good one) before it sends SIGHUP; it listens on one port for
the whole run, so a restart is the same address to the scrapers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.ports import free_port
from bench.soak.clock import SharedClock, boottime
from bench.soak.schedule import AIHC, FILE, LIST
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.simulator.alaya import DEMO_ACCESS_KEY_ID as LIST_AK
from exporter.simulator.alaya import DEMO_API_KEY
from exporter.simulator.alaya import DEMO_SECRET_ACCESS_KEY as LIST_SK

ROOT = Path(__file__).resolve().parents[2]
ROUND = 60.0
# Longer than the default 10 s: at 150 x a simulated minute is 0.4 s of a shared machine.
TIMEOUT = 60.0
RATE = 2.0
CONCURRENCY = 4
# The keys before and after the rotation.
KEYS = {
    "old": {
        "aihc_ak": DEMO_ACCESS_KEY_ID,
        "aihc_sk": DEMO_SECRET_ACCESS_KEY,
        "alaya": DEMO_API_KEY,
    },
    "new": {
        "aihc_ak": "soak-rotated-aihc-access-key-id",
        "aihc_sk": "soak/Rotated+aihc&secret=key0123",
        "alaya": "soak-rotated-alaya-api-key-4567",
    },
}
SECRETS = (*KEYS["old"].values(), *KEYS["new"].values(), LIST_AK, LIST_SK)


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def env(clock: SharedClock, stepped: bool = False) -> dict[str, str]:
    return {**clock.env(stepped), "PYTHONPATH": str(ROOT)}


@dataclass
class Simulator:
    clock: SharedClock
    seed: int
    process: subprocess.Popen[str] | None = None
    url: str = ""
    control: str = ""

    def start(self) -> None:
        command = [sys.executable, "-m", "exporter", "simulate", "--listen", "127.0.0.1:0"]
        extra = ["--control", "127.0.0.1:0", "--seed", str(self.seed), "--alaya-lively"]
        self.process = subprocess.Popen(
            [*command, *extra], cwd=ROOT, env=env(self.clock), stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().rsplit(" ", 1)[1].strip()
        self.control = self.process.stdout.readline().rsplit(" ", 1)[1].strip()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.communicate(timeout=30)


@dataclass
class Exporter:
    clock: SharedClock
    workdir: Path
    endpoints: dict[str, str]
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    generation: int = 0
    started_at: float = 0.0
    logs: list[Path] = field(default_factory=list)
    exits: list[tuple[int | None, float]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        return self.workdir / "exporter.yaml"

    @property
    def jobs_file(self) -> Path:
        return self.workdir / "alaya-jobs.yaml"

    def write_keys(self, which: str) -> None:
        for name, value in KEYS[which].items():
            (self.workdir / name).write_text(value)

    def write_config(self, valid: bool = True) -> None:
        document = config(self.endpoints, self.workdir, self.jobs_file, self.port)
        if not valid:
            document["poll_interval"] = "-5s"
            document["aihc"][0]["resource_pool_id"] = ""
        self.config.write_text(yaml.safe_dump(document, sort_keys=False))

    def start(self) -> None:
        self.generation += 1
        log = self.workdir / f"exporter-{self.generation}.log"
        self.logs.append(log)
        with log.open("wb") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "exporter", "--config", str(self.config)],
                cwd=ROOT,
                env=env(self.clock, stepped=True),
                stdout=sink,
                stderr=sink,
            )
        self.started_at = boottime()

    def listening(self, wait: float = 120.0, attempts: int = 3) -> None:
        """Returns once the exporter listens. One whose port another process took before it
        bound it (the suite runs beside the soak) is started again on another free port."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                log = self.logs[-1].read_text()
                if '"cannot listen"' in log and attempts > 1:
                    attempts -= 1
                    self.port = free_port()
                    self.write_config()
                    self.start()
                    continue
                raise SystemExit(f"the exporter exited: {log[-2000:]}")
            if any('"listening"' in line for line in self.logs[-1].read_text().splitlines()):
                return
            time.sleep(0.05)
        raise SystemExit("the exporter did not listen")

    def signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    def stop(self) -> None:
        """SIGTERM, and how it went: (exit code, seconds to exit)."""
        if self.process is None or self.process.poll() is not None:
            return
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code: int | None = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            code = None
        self.exits.append((code, time.monotonic() - began))

    @property
    def pid(self) -> int | None:
        return (
            self.process.pid if self.process is not None and self.process.poll() is None else None
        )

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for path in self.logs:
            for text in path.read_text(errors="replace").splitlines():
                try:
                    lines.append(json.loads(text))
                except ValueError:
                    lines.append({"event": text, "level": "raw"})
        return lines


def config(endpoints: dict[str, str], workdir: Path, jobs_file: Path, port: int) -> dict[str, Any]:
    limits = {
        "requests_per_second": RATE,
        "max_concurrency": CONCURRENCY,
        "timeout": f"{TIMEOUT:g}s",
        "retries": 2,
    }
    return {
        "poll_interval": f"{ROUND:g}s",
        "web": {"listen_address": f"127.0.0.1:{port}"},
        "log": {"level": "info", "format": "json"},
        "aihc": [
            {
                "name": AIHC,
                "endpoint": endpoints[AIHC],
                "access_key_id_file": str(workdir / "aihc_ak"),
                "secret_access_key_file": str(workdir / "aihc_sk"),
                "resource_pool_id": DEMO_RESOURCE_POOL,
                "metric_types": ["GpuUsage", "GpuMemoryUsage", "CpuUsage", "MemoryUsage"],
                "limits": limits,
            }
        ],
        "alaya": [
            {
                "name": FILE,
                "endpoint": endpoints[FILE],
                "api_key_file": str(workdir / "alaya"),
                "jobs_file": str(jobs_file),
                "types": ["gpu", "cpu"],
                "limits": limits,
            },
            {
                "name": LIST,
                "endpoint": endpoints[LIST],
                "api_key_file": str(workdir / "alaya"),
                "discovery": "list",
                "access_key_id": LIST_AK,
                "secret_access_key": LIST_SK,
                "aidc_id": "1",
                "pod_pattern": "worker-{index}",
                "types": ["gpu", "cpu"],
                "limits": limits,
            },
        ],
    }
