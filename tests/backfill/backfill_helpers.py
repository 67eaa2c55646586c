"""A simulator with known history on both providers, a configuration naming it, and the
backfill command run as a real subprocess beside the simulator's event loop."""

from __future__ import annotations

import asyncio
import math
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from exporter.providers.kit.numbers import scaled
from exporter.simulator import Simulator
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from exporter.simulator.aihc_jobs import SimJob
from exporter.simulator.aihc_replies import metric_series
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld
from tests.backfill.real_stores import Samples
from tests.conftest import cli_env

REPO = Path(__file__).resolve().parents[2]
POOL = "cce-backfill01"
STEP = 60
HOUR = 3600


@dataclass
class History:
    """Unix seconds of the window and the jobs in it."""

    now: float
    since: int
    until: int
    simulator: Simulator
    aihc_running: SimJob
    aihc_finished: SimJob
    alaya_running: str
    alaya_finished: str
    alaya_finished_end: float

    @property
    def job_ids(self) -> list[str]:
        return [job.job_id for job in self.aihc.jobs.values()] + list(self.alaya.jobs)

    @property
    def aihc(self) -> AihcWorld:
        assert self.simulator.aihc is not None
        return self.simulator.aihc

    @property
    def alaya(self) -> AlayaWorld:
        assert self.simulator.alaya is not None
        return self.simulator.alaya


@dataclass(frozen=True)
class FilePath:
    """A history, and what the file path wrote for it: `output` (read only: copy it to change
    it) and its samples."""

    world: History
    output: Path
    samples: Samples


def history(now: float, hours: int = 4, seed: int = 7) -> History:
    """A running and a finished job on each provider, over `hours` up to a minute ago; the
    job ids come from `seed`."""
    aihc = AihcWorld.fixed(seed, pools={POOL: ["default"]}, jobs=0)
    running = aihc.add_job(status="Running", pods=2, created_at=now - 3 * HOUR)
    finished = aihc.add_job(
        status="Succeeded", pods=2, created_at=now - hours * HOUR + 600, ended_at=now - HOUR
    )
    alaya = AlayaWorld(seed, job_count=1, pods_per_job=2, cards_per_pod=2)
    alaya_running = next(iter(alaya.jobs))
    end = now - 1.5 * HOUR
    alaya_finished = alaya.add_job(2, created=now - 3 * HOUR, start=now - 3 * HOUR, end=end)
    since = int(now - hours * HOUR) // STEP * STEP
    until = int(now - 60) // STEP * STEP
    simulator = Simulator(seed=seed, aihc=aihc, alaya=alaya)
    return History(
        now, since, until, simulator, running, finished, alaya_running, alaya_finished, end
    )


def write_config(path: Path, url: str, world: History, **aihc: Any) -> Path:
    alaya = world.alaya
    config = {
        "aihc": [
            {
                "name": "sim-aihc",
                "endpoint": url,
                "access_key_id": DEMO_ACCESS_KEY_ID,
                "secret_access_key": DEMO_SECRET_ACCESS_KEY,
                "resource_pool_id": POOL,
                "metric_types": ["GpuUsage", "CpuUsage"],
                **aihc,
            }
        ],
        "alaya": [
            {
                "name": "sim-alaya",
                "endpoint": url,
                "api_key": DEMO_API_KEY,
                "types": ["gpu", "cpu"],
                "jobs": [{"id": job, "pods": alaya.jobs[job]} for job in alaya.jobs],
            }
        ],
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def options(config: Path, world: History | None = None, output: str = "history.om") -> list[str]:
    """`--config`, the world's window (when given), 50 requests a second and `--output`."""
    window = ["--since", str(world.since), "--until", str(world.until)] if world else []
    return ["--config", str(config), *window, "--requests-per-second", "50", "--output", output]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


async def start_backfill(*args: str, cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "exporter",
        "backfill",
        *args,
        cwd=cwd,
        env=cli_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finish(process: asyncio.subprocess.Process, timeout: float = 120) -> Run:
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


async def backfill(*args: str, cwd: Path, timeout: float = 120) -> Run:
    return await finish(await start_backfill(*args, cwd=cwd), timeout)


def aihc_points(world: History, job: SimJob, pod: str, metric_type: str) -> list[tuple[int, float]]:
    """The simulator's points of one pod over the window, in the exported unit (ratios)."""
    start = max(world.since, math.ceil(job.created_at))
    series = metric_series(world.aihc, job, metric_type, start, world.until, STEP)
    points = next(s["metrics"] for s in series if s["podName"] == pod)
    return [(int(p["time"]), scaled(float(p["value"]), 100)) for p in points]


def alaya_points(
    world: History, job: str, pod: str, metric_type: str, card: int | None
) -> list[tuple[int, float]]:
    """The simulator's points of one series over the window (60 s apart in 2 h windows)."""
    first = -(-world.since // STEP) * STEP
    end = world.until
    if job == world.alaya_finished:
        end = min(end, int(world.alaya_finished_end))
    return [
        (t, float(f"{world.alaya.value(job, pod, metric_type, card, t):.4f}"))
        for t in range(first, end + 1, STEP)
    ]


async def interrupt(
    world: History, args: list[str], cwd: Path, sig: signal.Signals, calls: int
) -> tuple[int, str]:
    """Start a backfill, and send `sig` once the simulator served `calls` more metric calls."""
    before = len(world.simulator.log.entries)

    def served() -> int:
        entries = list(world.simulator.log.entries)[before:]
        return sum(e.endpoint in ("gpu-metrics", "DescribeJobMetrics") for e in entries)

    process = await start_backfill(*args, cwd=cwd)
    while served() < calls:
        assert process.returncode is None, (await process.communicate())[1].decode()
        await asyncio.sleep(0.02)
    process.send_signal(sig)
    run = await finish(process)
    return run.code, run.stderr


def assert_refused(code: int, stderr: str, says: str, tmp_path: Path) -> None:
    """Exit 2, `says` on stderr's only line, and no output or state beside `tmp_path`'s h.om."""
    lines = stderr.strip().splitlines()
    assert code == 2, stderr
    assert len(lines) == 1 and says in lines[0], stderr
    assert not (tmp_path / "h.om").exists() and not (tmp_path / "h.om.state").exists()
