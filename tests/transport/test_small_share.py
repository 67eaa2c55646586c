"""A share of the budget smaller than the workers can use: waiting for a slot is not a timeout.

Shard 0 of 20 on `requests_per_second: 10` is a 0.5 request/s share; with `max_concurrency: 8`
the eighth call waits 16 s for its slot, past a 10 s `timeout`. Over HTTP against the
simulator, through the app as it runs. SCALE divides every time and multiplies the budget (the
same slots per timeout, the same workers per slot; 4 keeps the share a whole number, as 0.5 is
under one, so the limiter's floor does not change the plan); the issue's own numbers (75 s)
run as the slow case.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Limits, Settings, ShardConfig
from exporter.server import build_app
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from tests.target_helpers import aihc_target


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


async def run(aiohttp_client, scale: float, hang: bool = False) -> str:  # type: ignore[no-untyped-def]
    simulator = Simulator(seed=7, aihc=AihcWorld.fixed(jobs=20, pods_per_job=2))
    if hang:
        simulator.faults.hang_rate, simulator.faults.hang_seconds = 1.0, 3600.0
    limits = Limits(
        requests_per_second=10 * scale, max_concurrency=8, timeout=10 / scale, retries=0
    )
    async with running(simulator) as served:
        target = aihc_target(served.url, limits=limits)
        settings = Settings(
            poll_interval=60 / scale, aihc=[target], shard=ShardConfig(index=0, count=20)
        )
        client: TestClient = await aiohttp_client(build_app(settings))
        await asyncio.sleep(75 / scale)
        text = await (await client.get("/metrics")).text()
        await client.close()
    return text


def timeouts(text: str) -> float:
    requests = samples(text, "training_exporter_api_requests_total")
    return sum(v for labels, v in requests.items() if ("code", "timeout") in labels)


def answered(text: str) -> float:
    requests = samples(text, "training_exporter_api_requests_total")
    return sum(v for labels, v in requests.items() if ("code", "200") in labels)


@pytest.mark.parametrize("scale", [pytest.param(1.0, marks=pytest.mark.slow), 4.0])
async def test_a_half_request_a_second_share_is_up_and_never_times_out(
    aiohttp_client,  # type: ignore[no-untyped-def]
    scale: float,
) -> None:
    text = await run(aiohttp_client, scale)
    (up,) = samples(text, "training_exporter_up").values()
    print(f"scale {scale}: up {up}, timeouts {timeouts(text)}, answered {answered(text)}")
    assert (up, timeouts(text)) == (1.0, 0.0), f"{answered(text)} answered"
    assert answered(text) >= 10


async def test_a_provider_that_hangs_still_times_out_at_timeout(aiohttp_client) -> None:  # type: ignore[no-untyped-def]
    # Scale 4: 2.5 s; in 18.75 s the listing has timed out more than once, nothing answered.
    text = await run(aiohttp_client, 4.0, hang=True)
    (up,) = samples(text, "training_exporter_up").values()
    assert up == 0.0
    assert timeouts(text) >= 2 and answered(text) == 0
