"""A 2 jobs x 4 pods x 8 cards Alaya simulator on loopback, with its clock held at T0."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import structlog

from exporter.logs import configure_logging
from exporter.providers.alaya import AlayaProvider
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.alaya import AlayaWorld
from exporter.targets import tier_plan

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
        target = make_target(alaya_url, world, **overrides)
        provider = AlayaProvider(target, metrics, tier_plan(target, 60.0))
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.close()


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """Every log line at debug level, as JSON, the way the CLI writes them."""
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level, config = root.handlers[:], root.level, structlog.get_config()
    configure_logging("debug", "json", stream=stream)
    yield stream
    structlog.configure(**config)
    root.handlers[:] = handlers
    root.setLevel(level)
