"""How the simulator serves the fake AIHC (`exporter.simulator.aihc`) and the demo polls it:
the provider's `ProviderSpec.simulated`."""

from __future__ import annotations

import argparse
from contextlib import AsyncExitStack
from dataclasses import dataclass

from aiohttp import web
from pydantic import SecretStr

from exporter.configkit import TargetBase
from exporter.providers.aihc.target import AihcTarget
from exporter.simulator.aihc import (
    DEMO_ACCESS_KEY_ID,
    DEMO_RESOURCE_POOL,
    DEMO_SECRET_ACCESS_KEY,
    AihcWorld,
    register_aihc,
)


class SimulatedAihc:
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--aihc-jobs",
            type=int,
            default=0,
            metavar="N",
            help=f"serve exactly N running AIHC jobs in {DEMO_RESOURCE_POOL} (0: the lively world)",
        )
        parser.add_argument(
            "--aihc-pods", type=int, default=2, metavar="N", help="pods per fixed job"
        )
        parser.add_argument(
            "--aihc-spelling",
            choices=("docs", "sdk"),
            default="docs",
            help="field names of AIHC job items and pods: the documentation's or Baidu's SDK's",
        )

    def world(self, seed: int, args: argparse.Namespace | None = None) -> AihcWorld:
        world = AihcWorld(seed=seed)
        if args is not None and args.aihc_jobs > 0:
            world = AihcWorld.fixed(
                seed,
                pools={DEMO_RESOURCE_POOL: ["default"]},
                jobs=args.aihc_jobs,
                pods_per_job=args.aihc_pods,
            )
        if args is not None:
            world.spelling = args.aihc_spelling
        return world

    def register(self, app: web.Application, world: AihcWorld) -> None:
        register_aihc(app, world)

    def greeting(self, world: AihcWorld) -> list[str]:
        return [f"AIHC: access key id {DEMO_ACCESS_KEY_ID}, resource pool {DEMO_RESOURCE_POOL}"]

    async def demo(
        self, seed: int, stack: AsyncExitStack, poll_interval: float, rotate_every: float
    ) -> AihcDemo:
        return AihcDemo(AihcWorld(seed=seed))


@dataclass(frozen=True, slots=True)
class AihcDemo:
    world: AihcWorld

    def targets(self, url: str) -> list[TargetBase]:
        return [
            AihcTarget(
                name="demo-aihc",
                endpoint=url,
                access_key_id=SecretStr(DEMO_ACCESS_KEY_ID),
                secret_access_key=SecretStr(DEMO_SECRET_ACCESS_KEY),
                resource_pool_id=DEMO_RESOURCE_POOL,
            )
        ]


SIMULATED = SimulatedAihc()
