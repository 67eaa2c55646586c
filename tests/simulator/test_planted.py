"""Planted faults (`AihcWorld.plant`, `AlayaWorld.plant_slow_card`): seeded, reproducible, off
by default, and visible in what the exporter reads from the simulator over HTTP."""

from __future__ import annotations

import statistics
import time
from collections import defaultdict

import pytest

from bench.oneshot import read_all
from exporter.providers.aihc import AihcProvider
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_jobs import PLANTED
from exporter.simulator.aihc_service import SIMULATED as SIMULATED_AIHC
from exporter.simulator.alaya import AlayaWorld
from exporter.simulator.cli import parser as simulator_parser
from exporter.targets import tier_plan
from tests.target_helpers import TEST_POOL, aihc_target

TYPES = {
    "GpuUsage": "training_pod_gpu_utilization_ratio",
    "GpuPowerUsage": "training_pod_gpu_power_watts",
    "GpuTemperature": "training_pod_gpu_temperature_celsius",
    "RDMASendDataRate": "training_pod_rdma_transmit_bytes_per_second",
}


def planted_world(seed: int) -> AihcWorld:
    world = AihcWorld.fixed(seed, pools={TEST_POOL: ["default"]}, jobs=3, pods_per_job=4)
    for fault in PLANTED:
        world.plant(fault, pods=4)
    return world


async def read(world: AihcWorld) -> dict[tuple[str, str], dict[str, float]]:
    """(metric, job id) -> pod -> value, as the exporter reads them from the simulator."""
    async with running(Simulator(aihc=world)) as served:
        target = aihc_target(
            served.url, metric_types=list(TYPES), events=False, limits={"requests_per_second": 0}
        )
        provider = AihcProvider(target, SelfMetrics(), tier_plan(target, 60.0))
        try:
            context = PollContext(time.monotonic() + 30, time.time(), lambda job_id: True)
            result = await read_all(provider, context)
        finally:
            await provider.close()
    assert result.ok
    values: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for parts in result.jobs.values():
        for part in parts.values():
            for sample in part.samples:  # type: ignore[union-attr]
                if sample.name in TYPES.values():
                    job, pod = sample.label_values[3], sample.label_values[4]
                    values[(sample.name, job)][pod] = sample.value
    return values


async def test_each_planted_fault_shows_in_what_the_exporter_reads() -> None:
    world = planted_world(5)
    values = await read(world)
    util, power, temp, rdma = TYPES.values()
    jobs = {job.fault: job for job in world.jobs.values()}
    for healthy in (job for job in world.jobs.values() if job.fault is None):
        pods = values[(util, healthy.job_id)]
        assert len(pods) == 4 and max(pods.values()) - min(pods.values()) < 0.01, pods

    def split(metric: str, fault: str) -> tuple[float, float]:
        job = jobs[fault]
        pods = values[(metric, job.job_id)]
        peers = statistics.median(v for pod, v in pods.items() if pod != job.fault_pod)
        return pods[job.fault_pod], peers

    slow, peers = split(util, "slow-rank")
    assert 0.5 < slow / peers < 0.6
    slow, peers = split(rdma, "slow-rank")
    assert 0.45 < slow / peers < 0.55
    hot, peers = split(temp, "throttled-card")
    assert hot - peers > 15
    low, peers = split(power, "throttled-card")
    assert low / peers < 0.65
    busy, peers = split(util, "throttled-card")
    assert abs(busy - peers) < 0.01
    assert max(values[(util, jobs["hung"].job_id)].values()) < 0.005
    assert max(values[(rdma, jobs["hung"].job_id)].values()) < 1e6
    assert min(values[(util, jobs["idle"].job_id)].values()) > 0.02
    assert max(values[(util, jobs["idle"].job_id)].values()) < 0.07
    assert min(values[(rdma, jobs["idle"].job_id)].values()) > 1e6


def test_planting_is_seeded() -> None:
    def shape(world: AihcWorld) -> list[tuple[str | None, str, str]]:
        return [(j.fault, j.job_id, j.fault_pod) for j in world.jobs.values()]

    assert shape(planted_world(5)) == shape(planted_world(5))
    assert shape(planted_world(5)) != shape(planted_world(6))
    with pytest.raises(ValueError, match="no fault"):
        AihcWorld.fixed(5).plant("on-fire")


def test_worlds_are_healthy_unless_asked() -> None:
    parser = simulator_parser()
    world = SIMULATED_AIHC.world(42, parser.parse_args(["--aihc-jobs", "3"]))
    assert not world.in_step and all(job.fault is None for job in world.jobs.values())
    assert not AihcWorld(42).in_step
    assert SIMULATED_AIHC.greeting(world)[1:] == []
    assert AlayaWorld(42).slow_cards == {}


def test_the_cli_plants_what_it_is_asked() -> None:
    args = simulator_parser().parse_args(
        ["--aihc-jobs", "2", "--aihc-plant", "hung", "--aihc-plant", "idle"]
    )
    world = SIMULATED_AIHC.world(42, args)
    assert world.in_step
    assert sorted(str(j.fault) for j in world.jobs.values() if j.fault) == ["hung", "idle"]
    lines = SIMULATED_AIHC.greeting(world)[1:]
    assert [line.split(":")[0] for line in lines] == ["AIHC planted hung", "AIHC planted idle"]


def test_an_alaya_slow_card_runs_at_half_its_peers() -> None:
    planted, plain = AlayaWorld(7), AlayaWorld(7)
    job = next(iter(planted.jobs))
    pod, card = planted.plant_slow_card(job)
    assert planted.plant_slow_card(job) == (pod, card)  # seeded
    t = 1_700_000_030
    slow = planted.value(job, pod, "gpu", card, t)
    assert slow == pytest.approx(plain.value(job, pod, "gpu", card, t) / 2, abs=1e-4)
    other = (card + 1) % planted.cards_per_pod
    assert planted.value(job, pod, "gpu", other, t) == plain.value(job, pod, "gpu", other, t)
