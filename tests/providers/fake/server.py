"""The fake service over HTTP: a few jobs and their pods' GPU load, behind a bearer token.

`SIMULATED` is how the simulator serves it (`training-job-exporter simulate`), so the third
provider's fake runs where AIHC's and Alaya's do.
"""

from __future__ import annotations

import argparse
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from aiohttp import web
from pydantic import SecretStr

from exporter.configkit import TargetBase
from tests.providers.fake.target import FakeTarget

TOKEN = "fake-token"


@dataclass
class FakeWorld:
    # job id -> (state, pod -> GPU load)
    jobs: dict[str, tuple[str, dict[str, float]]] = field(default_factory=dict)
    token: str = TOKEN

    @classmethod
    def seeded(cls, seed: int, jobs: int = 2, pods: int = 2) -> FakeWorld:
        return cls(
            {
                f"fake-job-{j}": (
                    "Running",
                    {
                        f"worker-{p}": round(((seed + j * 7 + p * 3) % 10) / 10, 2)
                        for p in range(pods)
                    },
                )
                for j in range(jobs)
            }
        )


def register(app: web.Application, world: FakeWorld) -> None:
    def authorised(request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {world.token}"

    async def jobs(request: web.Request) -> web.Response:
        if not authorised(request):
            return web.json_response({"error": "forbidden"}, status=403)
        listed = [
            {"id": job_id, "state": state, "pods": sorted(pods)}
            for job_id, (state, pods) in world.jobs.items()
        ]
        return web.json_response({"jobs": listed})

    async def load(request: web.Request) -> web.Response:
        if not authorised(request):
            return web.json_response({"error": "forbidden"}, status=403)
        job = world.jobs.get(request.match_info["job"])
        gpu = job[1].get(request.match_info["pod"]) if job else None
        if gpu is None:
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response({"gpu": gpu})

    app.router.add_get("/fake/v1/jobs", jobs)
    app.router.add_get("/fake/v1/jobs/{job}/pods/{pod}/load", load)


class SimulatedFake:
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--fake-jobs", type=int, default=2, metavar="N")

    def world(self, seed: int, args: argparse.Namespace | None = None) -> FakeWorld:
        return FakeWorld.seeded(seed, jobs=args.fake_jobs if args is not None else 2)

    def register(self, app: web.Application, world: FakeWorld) -> None:
        register(app, world)

    def greeting(self, world: FakeWorld) -> list[str]:
        return [f"Fake: token {world.token}, jobs {sorted(world.jobs)}"]

    async def demo(
        self, seed: int, stack: AsyncExitStack, poll_interval: float, rotate_every: float
    ) -> FakeDemo:
        return FakeDemo(FakeWorld.seeded(seed))


@dataclass(frozen=True, slots=True)
class FakeDemo:
    world: FakeWorld

    def targets(self, url: str) -> list[TargetBase]:
        return [FakeTarget(name="demo-fake", endpoint=url, token=SecretStr(self.world.token))]


SIMULATED = SimulatedFake()
