"""A 2 jobs x 4 pods x 8 cards Alaya simulator on loopback, with its clock held at T0."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from exporter.providers.alaya import AlayaProvider
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.alaya import AlayaWorld

from .alaya_helpers import T0, make_target


@pytest.fixture
def world() -> AlayaWorld:
    return AlayaWorld(seed=11, job_count=2, pods_per_job=4, cards_per_pod=8, clock=lambda: T0)


@pytest.fixture
def alaya_sim(world: AlayaWorld) -> Simulator:
    return Simulator(seed=11, alaya=world)


@pytest.fixture
async def alaya_url(alaya_sim: Simulator) -> AsyncIterator[str]:
    async with running(alaya_sim) as served:
        yield served.url


@pytest.fixture
def metrics() -> SelfMetrics:
    return SelfMetrics()


@pytest.fixture
async def make_provider(
    alaya_url: str, world: AlayaWorld, metrics: SelfMetrics
) -> AsyncIterator[Callable[..., AlayaProvider]]:
    made: list[AlayaProvider] = []

    def factory(**overrides: Any) -> AlayaProvider:
        provider = AlayaProvider(make_target(alaya_url, world, **overrides), metrics)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.close()
