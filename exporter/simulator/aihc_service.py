"""How the simulator serves the fake AIHC (`exporter.simulator.aihc`) and the demo polls it:
the provider's `ProviderSpec.simulated`."""

from __future__ import annotations

import argparse
from contextlib import AsyncExitStack
from dataclasses import dataclass
from weakref import WeakKeyDictionary

from aiohttp import web
from pydantic import SecretStr

from exporter.configkit import Limits, TargetBase
from exporter.providers.aihc.target import AihcTarget
from exporter.simulator import lifecycle
from exporter.simulator.aihc import (
    DEMO_ACCESS_KEY_ID,
    DEMO_RESOURCE_POOL,
    DEMO_SECRET_ACCESS_KEY,
    AihcWorld,
)
from exporter.simulator.aihc_api import register_aihc
from exporter.simulator.aihc_jobs import PLANTED

# Pods of each planted job (`--aihc-plant`, the demo's): enough for a median to outvote one.
PLANTED_PODS = 4
# The demo target's request budget: the planted rank faults and lifecycle cases triple its
# first round's calls (about 500), which at the default 10 requests/s would keep /-/ready
# waiting near a minute, and at 30 about 17 s (the simulator is loopback).
DEMO_REQUESTS_PER_SECOND = 60.0


def lifecycle_world(world: AihcWorld, seed: int, scale: float) -> list[lifecycle.Planted]:
    """`world`'s demo pool with the lifecycle stream and planted cases (its queues added)."""
    queues = world.pools.setdefault(DEMO_RESOURCE_POOL, [])
    queues += [q for q in lifecycle.QUEUE_WAITS if q not in queues]
    now = world.now()
    lifecycle.populate(world, seed=seed, pool=DEMO_RESOURCE_POOL, now=now, scale=scale)
    return lifecycle.plant(world, seed=seed, pool=DEMO_RESOURCE_POOL, now=now, scale=scale)


class SimulatedAihc:
    def __init__(self) -> None:
        # world -> the lifecycle cases planted in it (`--aihc-lifecycle`).
        self.planted: WeakKeyDictionary[AihcWorld, list[lifecycle.Planted]] = WeakKeyDictionary()

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
            "--aihc-plant",
            action="append",
            choices=PLANTED,
            default=[],
            metavar="FAULT",
            help=f"add a Running job of {PLANTED_PODS} pods with this fault, its pods and every "
            f"other job's in step (repeatable; {', '.join(PLANTED)})",
        )
        parser.add_argument(
            "--aihc-lifecycle",
            action="store_true",
            help="add a lifecycle world to the demo pool: queues that wait, failures of each "
            "class, restarts, and one planted case of each lifecycle alert",
        )
        parser.add_argument(
            "--aihc-lifecycle-scale",
            type=float,
            default=1.0,
            metavar="F",
            help="the lifecycle world's durations times F (0.0083: an hour in 30 s)",
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
            for fault in args.aihc_plant:
                world.plant(fault, pods=PLANTED_PODS, pool=DEMO_RESOURCE_POOL)
            if args.aihc_lifecycle:
                self.planted[world] = lifecycle_world(world, seed, args.aihc_lifecycle_scale)
        return world

    def register(self, app: web.Application, world: AihcWorld) -> None:
        register_aihc(app, world)

    def greeting(self, world: AihcWorld) -> list[str]:
        return [
            f"AIHC: access key id {DEMO_ACCESS_KEY_ID}, resource pool {DEMO_RESOURCE_POOL}",
            *planted_lines(world),
            *lifecycle.planted_lines(self.planted.get(world, [])),
        ]

    async def demo(
        self, seed: int, stack: AsyncExitStack, poll_interval: float, rotate_every: float
    ) -> AihcDemo:
        # One job of each planted fault beside the lively ones, and the lifecycle cases (a
        # failure of each class, a burst, a restart loop, a job waiting too long): `make demo`
        # with Prometheus and deploy/prometheus/*.yaml shows each alert firing.
        world = AihcWorld(seed=seed)
        for fault in PLANTED:
            world.plant(fault, pods=PLANTED_PODS, pool=DEMO_RESOURCE_POOL)
        lifecycle.plant(world, seed=seed, pool=DEMO_RESOURCE_POOL, now=world.now())
        return AihcDemo(world)


def planted_lines(world: AihcWorld) -> list[str]:
    """One line per planted job: its fault, job id and the pod it hits."""
    return [
        f"AIHC planted {job.fault}: job {job.job_id}"
        + (f", pod {job.fault_pod}" if job.fault in ("slow-rank", "throttled-card") else "")
        for job in world.jobs.values()
        if job.fault is not None
    ]


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
                limits=Limits(requests_per_second=DEMO_REQUESTS_PER_SECOND),
            )
        ]


SIMULATED = SimulatedAihc()
