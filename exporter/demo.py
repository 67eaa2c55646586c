"""`--demo`: the simulator on loopback, and one AIHC and one Alaya target polling it.

The Alaya target reads its jobs from a jobs file that the demo rewrites every
`DEMO_ROTATE_SECONDS` (two demo polls): one job stays, two others take turns, so a newcomer
sees a job appear and another go on /metrics. The file lives in a temporary directory that
is removed on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import yaml
from pydantic import SecretStr

from exporter.config import AihcTarget, AlayaTarget, Settings
from exporter.logs import get_logger
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld

log = get_logger(__name__)

DEMO_POLL_INTERVAL = 15.0
DEMO_ROTATE_SECONDS = 30.0


def demo_settings(settings: Settings, url: str, simulator: Simulator, jobs_file: Path) -> Settings:
    """`settings` with the demo targets added, pointed at a simulator served at `url`."""
    aihc = AihcTarget(
        name="demo-aihc",
        endpoint=url,
        access_key_id=SecretStr(DEMO_ACCESS_KEY_ID),
        secret_access_key=SecretStr(DEMO_SECRET_ACCESS_KEY),
        resource_pool_id=DEMO_RESOURCE_POOL,
    )
    alaya = AlayaTarget(
        name="demo-alaya", endpoint=url, api_key=SecretStr(DEMO_API_KEY), jobs_file=jobs_file
    )
    return settings.model_copy(
        update={
            "aihc": [*settings.aihc, aihc],
            "alaya": [*settings.alaya, alaya],
            "poll_interval": min(settings.poll_interval, DEMO_POLL_INTERVAL),
        }
    )


class RotatingJobsFile:
    """A jobs file listing the first job and, in turn, one of the others."""

    def __init__(self, path: Path, jobs: Mapping[str, Sequence[str]]) -> None:
        self.path = path
        self._jobs = dict(jobs)
        self._ids = list(jobs)
        self.step = 0

    def listed(self, step: int) -> list[str]:
        rest = self._ids[1:]
        return [self._ids[0], rest[step % len(rest)]] if rest else self._ids[:1]

    def write(self) -> None:
        """Write the current step's list atomically: a temporary file renamed over it."""
        document = {
            "jobs": [{"id": i, "pods": list(self._jobs[i])} for i in self.listed(self.step)]
        }
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        os.replace(temporary, self.path)

    async def run(self, every: float, first: float) -> None:
        await asyncio.sleep(first)
        while True:
            self.step += 1
            self.write()
            log.debug("demo jobs file rewritten", path=str(self.path), jobs=self.listed(self.step))
            await asyncio.sleep(every)


async def start_demo(
    settings: Settings, stack: AsyncExitStack, rotate_every: float = DEMO_ROTATE_SECONDS
) -> Settings:
    # Three Alaya jobs (the first two are those of the default world): one stays in the jobs
    # file, two take turns.
    simulator = Simulator(seed=42, alaya=AlayaWorld(seed=42, job_count=3))
    served = await stack.enter_async_context(running(simulator))
    log.info("demo simulator started", url=served.url)
    directory = Path(tempfile.mkdtemp(prefix="training-job-exporter-demo-"))
    stack.callback(shutil.rmtree, directory, ignore_errors=True)
    assert simulator.alaya is not None
    jobs_file = RotatingJobsFile(directory / "alaya-jobs.yaml", simulator.alaya.jobs)
    jobs_file.write()
    # Half a poll off the polls (which start with the exporter), so each change shows at the
    # next poll rather than racing one.
    first = max(rotate_every - min(settings.poll_interval, DEMO_POLL_INTERVAL) / 2, 0.0)
    task = asyncio.create_task(jobs_file.run(rotate_every, first), name="demo-jobs-file")
    stack.push_async_callback(_cancel, task)
    log.info(
        "demo alaya jobs file: one job stays, two take turns",
        path=str(jobs_file.path),
        every_seconds=rotate_every,
    )
    return demo_settings(settings, served.url, simulator, jobs_file.path)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
