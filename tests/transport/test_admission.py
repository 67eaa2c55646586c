"""A call that will not be sent costs the provider nothing: counted on the wire.

The simulator sits behind a TCP tap (`exporter.simulator.tap`) that counts every connection
it accepts; the simulator's own log counts requests. The client runs on simulated time (its
clock and sleep given to its constructor), so a 120 s `Retry-After` passes at once, and the
connections and requests are real.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from exporter.config import Limits
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.alaya import DEMO_API_KEY
from exporter.simulator.tap import Tap, tapped
from exporter.transport.iface import ApiError, CallDropped, PreparedRequest
from exporter.transport.limited import LimitedClient

ROUND = 60.0


class Clock:
    """Simulated time: sleeping moves it on at once."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


@pytest.fixture
async def wire() -> AsyncIterator[tuple[Simulator, Tap]]:
    simulator = Simulator(seed=3, aihc=AihcWorld.fixed(jobs=1))
    async with running(simulator) as served, tapped(served.url) as tap:
        yield simulator, tap


async def test_a_429_with_retry_after_120_opens_no_connection_and_sends_nothing_for_the_pause(
    wire: tuple[Simulator, Tap],
) -> None:
    simulator, tap = wire
    simulator.faults.retry_after = "120"
    simulator.faults.script.append(429)
    clock = Clock()
    limits = Limits(retries=0, requests_per_second=10, max_concurrency=4)
    client = LimitedClient("aihc", "t", limits, SelfMetrics(), clock=clock, sleep=clock.sleep)

    job, pods = next(iter(simulator.alaya.jobs.items()))
    url = f"{tap.url}/v1/training/instance/{job}/{pods[0]}/basic"
    bearer = {"Authorization": f"Bearer {DEMO_API_KEY}"}

    async def call(deadline: float) -> object:
        return await client.fetch(
            "basic",
            lambda: PreparedRequest("GET", url, bearer),
            lambda r: r.status,
            deadline=deadline,
        )

    try:
        with pytest.raises(ApiError, match="429"):
            await call(clock() + ROUND)
        assert (tap.connections, simulator.log.count()) == (1, 1)
        # The rest of the round, paused: 20 calls whose turn would come after the round ends.
        dropped = await asyncio.gather(
            *(call(clock() + ROUND) for _ in range(20)), return_exceptions=True
        )
        assert all(isinstance(d, CallDropped) for d in dropped), dropped
        during = (tap.connections - 1, simulator.log.count() - 1)
        # A call whose deadline is past the pause waits it out, and goes on the pooled
        # connection the 429 came on: none was closed by a call that was not sent.
        assert await call(clock() + 3 * ROUND) == 200
    finally:
        await client.close()
    print(f"during the pause: {during[0]} new connections, {during[1]} requests")
    assert during == (0, 0)
    assert clock.slept and clock.slept[0] == pytest.approx(120.0)
    assert (tap.connections, simulator.log.count()) == (1, 2)
    # The tap tells requests apart on the wire as the simulator does.
    assert len(tap.requests) == 2
