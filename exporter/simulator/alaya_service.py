"""How the simulator serves the fake Alaya (`exporter.simulator.alaya`) and the demo polls it:
the provider's `ProviderSpec.simulated`.

The demo's Alaya target reads its jobs from a jobs file rewritten every `rotate_every` (two
demo polls): one job stays, two others take turns, so a newcomer sees a job appear and another
go on /metrics. The file lives in a temporary directory removed on exit.

Its logger is got, and yaml imported, where the demo logs and writes the file, not at import:
`simulate` loads this module and does neither, and `get_logger` imports structlog (and rich
with it, where installed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from pydantic import SecretStr

from exporter.configkit import TargetBase
from exporter.logs import get_logger
from exporter.providers.alaya.target import AlayaTarget
from exporter.simulator.alaya import (
    DEMO_ACCESS_KEY_ID,
    DEMO_API_KEY,
    DEMO_SECRET_ACCESS_KEY,
    AlayaWorld,
)
from exporter.simulator.alaya_api import register_alaya
from exporter.simulator.lively import LivelyAlaya


class SimulatedAlaya:
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--alaya-jobs", type=int, default=0, metavar="N", help="Alaya jobs (0: the demo's)"
        )
        parser.add_argument(
            "--alaya-pods", type=int, default=3, metavar="N", help="pods per Alaya job"
        )
        parser.add_argument(
            "--alaya-lively",
            action="store_true",
            help="a lively Alaya world: jobs start, restart pods and finish with the clock",
        )
        parser.add_argument(
            "--alaya-slow-card",
            action="store_true",
            help="one card of the first Alaya job runs at half its peers' GPU utilisation",
        )

    def world(self, seed: int, args: argparse.Namespace | None = None) -> AlayaWorld:
        world = AlayaWorld(seed=seed)
        if args is not None and args.alaya_jobs > 0:
            world = AlayaWorld(seed, job_count=args.alaya_jobs, pods_per_job=args.alaya_pods)
        if args is not None and args.alaya_lively:
            world = LivelyAlaya(seed)
        if args is not None and args.alaya_slow_card:
            world.plant_slow_card(next(iter(world.jobs)))
        return world

    def register(self, app: web.Application, world: AlayaWorld) -> None:
        register_alaya(app, world)

    def greeting(self, world: AlayaWorld) -> list[str]:
        return [
            f"Alaya: api key {DEMO_API_KEY}, jobs {sorted(world.jobs)}",
            f"Alaya job list: access key id {DEMO_ACCESS_KEY_ID}, "
            f"secret access key {DEMO_SECRET_ACCESS_KEY}",
            *(
                f"Alaya planted slow card: job {job}, pod {pod}, card {card}"
                for (job, pod), card in world.slow_cards.items()
            ),
        ]

    async def demo(
        self, seed: int, stack: AsyncExitStack, poll_interval: float, rotate_every: float
    ) -> AlayaDemo:
        # Three jobs (the first two are those of the default world): one stays in the jobs
        # file, two take turns.
        world = AlayaWorld(seed=seed, job_count=3)
        # A slow card in the job that stays in the file: the per-card rank alert's example.
        world.plant_slow_card(next(iter(world.jobs)))
        directory = Path(tempfile.mkdtemp(prefix="training-job-exporter-demo-"))
        stack.callback(shutil.rmtree, directory, ignore_errors=True)
        jobs_file = RotatingJobsFile(directory / "alaya-jobs.yaml", world.jobs)
        jobs_file.write()
        # Half a poll off the polls (which start with the exporter), so each change shows at
        # the next poll rather than racing one.
        first = max(rotate_every - poll_interval / 2, 0.0)
        task = asyncio.create_task(jobs_file.run(rotate_every, first), name="demo-jobs-file")
        stack.push_async_callback(_cancel, task)
        get_logger(__name__).info(
            "demo alaya jobs file: one job stays, two take turns",
            path=str(jobs_file.path),
            every_seconds=rotate_every,
        )
        return AlayaDemo(world, jobs_file.path)


@dataclass(frozen=True, slots=True)
class AlayaDemo:
    world: AlayaWorld
    jobs_file: Path

    def targets(self, url: str) -> list[TargetBase]:
        return [
            AlayaTarget(
                name="demo-alaya",
                endpoint=url,
                api_key=SecretStr(DEMO_API_KEY),
                jobs_file=self.jobs_file,
            )
        ]


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
        import yaml

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
            get_logger(__name__).debug(
                "demo jobs file rewritten", path=str(self.path), jobs=self.listed(self.step)
            )
            await asyncio.sleep(every)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


SIMULATED = SimulatedAlaya()
