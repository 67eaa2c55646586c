"""The request budget: requests_per_second holds as the provider sees it, and is spent, even
when the sender's event loop wakes up late or stalls; on simulated time, and over HTTP."""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import threading
import time

import pytest
from aiohttp import web
from yarl import URL

from bench.oneshot import read_all
from bench.simulator import start_simulator
from exporter.config import Limits
from exporter.providers.aihc import AihcProvider
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.aihc import DEMO_RESOURCE_POOL
from exporter.simulator.core import busiest_window
from exporter.targets import tier_plan
from exporter.transport.gate import Gate
from exporter.transport.iface import PreparedRequest
from exporter.transport.limited import LimitedClient
from tests.target_helpers import aihc_target
from tests.wire_stamps import relay_process
from tests.work.virtual import START, VirtualLoop, simulate

TYPES = [
    "GpuUsage", "GpuMemoryUsage", "CpuUsage", "MemoryUsage", "CpuTime", "MemoryAllocation",
    "DiskReadRate", "DiskWriteRate", "RDMASendDataRate", "RDMARecvDataRate", "PCIESendDataRate",
    "PCIERecvDataRate", "NVLinkSendDataRate", "NVLinkRecvDataRate", "GpuTemperature",
    "GpuPowerUsage", "GpuPipeTensorUsage", "RDMAHealth", "RDMASendErrorRate", "RDMARecvErrorRate",
]  # fmt: skip


# 200 calls at 20 per second take 10 s of real time: over real HTTP, the budget's pace as
# the provider's side sees it (the simulated-time tests below cover its logic), counted when
# each request reached the kernel (`tests.wire_stamps`). Counted when the simulator got round
# to it, a loaded machine bunched them: served on the test's loop, a stall of that loop
# counted 22 in a second; in a process of its own, that process run late counted 25. The
# relay runs in a process of its own too: its threads in the test's process held the sender
# back between admission and write, and the full suite beside it counted 22 (2 of 4 runs).
@pytest.mark.slow
async def test_twenty_per_second_over_two_hundred_calls() -> None:
    # 2 list pages + 9 jobs x (1 detail + 20 metric types + 1 events) = 200 calls.
    process, url = start_simulator(["--seed", "5", "--aihc-jobs", "9", "--aihc-pods", "2"])
    upstream = URL(url)
    assert upstream.host is not None and upstream.port is not None
    try:
        with relay_process((upstream.host, upstream.port)) as (relay_url, stamps):
            target = aihc_target(
                relay_url,
                resource_pool_id=DEMO_RESOURCE_POOL,
                metric_types=TYPES,
                page_size=5,
                limits=Limits(requests_per_second=20, max_concurrency=16, retries=0, timeout=10),
            )
            provider = AihcProvider(target, SelfMetrics(), tier_plan(target, 60.0))
            started = time.monotonic()
            try:
                context = PollContext(deadline=started + 60, started_at=time.time())
                result = await read_all(provider, context, workers=16)
            finally:
                await provider.close()
            took = time.monotonic() - started
    finally:
        process.terminate()
        process.communicate(timeout=30)
    assert result.ok
    assert len(stamps) == 200
    busiest = busiest_window(stamps)
    offsets = [round(t - stamps[0], 3) for t in stamps]
    assert busiest <= 21, f"{busiest} requests within one second; arrivals (s): {offsets}"
    assert took <= 1.15 * 10, f"the poll took {took:.2f} s"


def written_by(
    rate: float, workers: int, seconds: float, late: float = 0.0, stall_at: float | None = None
) -> list[float]:
    """The write times of `workers` callers asking again as soon as they wrote, for `seconds`
    of simulated time; each wake-up up to `late` s late (a loaded loop), and once a 1.5 s
    stall of the whole loop at `stall_at`."""
    rng = random.Random(7)

    async def main(loop: VirtualLoop) -> list[float]:
        async def sleep(seconds: float) -> None:
            await asyncio.sleep(seconds + rng.uniform(0, late))

        budget = Gate(rate, loop.time, sleep)
        written: list[float] = []

        async def worker() -> None:
            while loop.time() < START + seconds:
                await budget.admit()
                written.append(loop.time())
                await asyncio.sleep(rng.uniform(0, 0.05))

        if stall_at is not None:
            loop.call_at(START + stall_at, setattr, loop, "now", START + stall_at + 1.5)
        await asyncio.gather(*(worker() for _ in range(workers)))
        return written

    return simulate(main)


def test_never_more_than_the_rate_in_a_second_and_the_budget_spent() -> None:
    # Wake-ups 0-3 ms late: a token bucket counting from them sent 87 of 100 a second.
    for rate in (10.0, 100.0, 3.5):
        written = written_by(rate, workers=8, seconds=60, late=0.003)
        assert busiest_window(written) <= math.floor(rate)
        assert len(written) >= 0.9 * math.floor(rate) * 60, (rate, len(written))


def test_late_wake_ups_do_not_cost_the_budget() -> None:
    # Wake-ups 0-4 ms late, as the exporter's were under load (bench.scale, issue 38): with
    # each write a slot after the last one, every late wake-up was lost, and 40 and 160 a
    # second sent 0.96 and 0.86 of their budget.
    for rate in (40.0, 160.0):
        written = written_by(rate, workers=8, seconds=30, late=0.004)
        assert busiest_window(written) <= math.floor(rate)
        assert len(written) >= 0.98 * math.floor(rate) * 30, (rate, len(written))


def test_on_pace_writes_are_a_slot_apart() -> None:
    # The window alone replays its first second: all 10 writes of every second within its
    # first half, where arrival jitter of 50 ms counts 11 or 12 at the provider. Below 50 a
    # second writes do not pair: at 40, a pair's longer window would cost 2.5 % of the budget.
    for rate in (10.0, 40.0):
        written = written_by(rate, workers=8, seconds=20)
        gaps = [b - a for a, b in itertools.pairwise(written) if a > START + 5]
        assert min(gaps) >= 1 / rate - 1e-9


def test_from_fifty_a_second_writes_go_in_pairs_two_slots_apart() -> None:
    # The loop wakes once for two requests: each wake-up from idle costs CPU of its own, and
    # with a write a slot apart the exporter's loop woke twice a request (bench.scale).
    written = written_by(50.0, workers=8, seconds=20)
    gaps = [round(b - a, 9) for a, b in itertools.pairwise(written) if a > START + 5]
    assert gaps.count(0.0) >= 0.49 * len(gaps)
    assert not any(a == b == 0.0 for a, b in itertools.pairwise(gaps))
    assert min(g for g in gaps if g) >= 0.04 - 1e-9
    assert len(written) >= 0.98 * 50 * 20


def test_a_pair_arriving_together_counts_at_most_one_more_than_the_rate() -> None:
    # Arrival jitter under a slot (20 ms at 50 a second): a pair written at a window's start
    # arriving late and one at its end early would count two more with a window of a second.
    rng = random.Random(3)
    for rate in (50.0, 160.0):
        written = written_by(rate, workers=8, seconds=30, late=0.003)
        arrivals = [t + rng.uniform(0, 0.9 / rate) for t in written]
        assert busiest_window(written) <= math.floor(rate)
        assert busiest_window(arrivals) <= math.floor(rate) + 1


def test_what_a_stall_held_back_goes_out_in_pairs_a_slot_apart_not_at_once() -> None:
    written = written_by(50.0, workers=8, seconds=10, stall_at=5.0)
    after = [t for t in written if t >= START + 6.5]
    assert busiest_window(after, 1 / 50 - 1e-9) <= 2
    assert busiest_window(written) <= 50


def test_under_one_a_second_one_request_per_its_period() -> None:
    written = written_by(0.5, workers=4, seconds=60)
    assert min(b - a for a, b in itertools.pairwise(written)) >= 2.0
    assert len(written) >= 29


def test_what_a_stall_held_back_goes_out_half_a_slot_apart_not_at_once() -> None:
    # A 1.5 s stall: with the window alone the 10 writes it freed went out in the same
    # instant, and jitter at the provider's second boundary counted 13 in one second.
    written = written_by(10.0, workers=8, seconds=10, stall_at=5.0)
    after = [t for t in written if t >= START + 6.5]
    assert min(b - a for a, b in itertools.pairwise(after)) >= 0.05 - 1e-9
    assert busiest_window(written) <= 10


def test_writes_go_in_the_order_they_were_asked_for() -> None:
    # Eight workers asking again as soon as they wrote, as the runner's do: each waits
    # behind at most the seven others, never for a lucky wake-up.
    async def main(loop: VirtualLoop) -> list[int]:
        budget = Gate(100, loop.time)
        asked = itertools.count()
        order: list[int] = []

        async def worker() -> None:
            for _ in range(25):
                ticket = next(asked)
                await budget.admit()
                order.append(ticket)

        await asyncio.gather(*(worker() for _ in range(8)))
        return order

    order = simulate(main)
    assert order == sorted(order)


class OwnLoopServer:
    """An HTTP server on a thread and loop of its own: a stall of the client's loop does not
    stall it, so it sees requests when they are written."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.url = ""
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        async def thing(request: web.Request) -> web.Response:
            self.arrivals.append(time.monotonic())
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_get("/thing", thing)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        port = runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/thing"
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())
        self._loop.close()

    def __enter__(self) -> OwnLoopServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


async def test_after_a_stall_of_the_loop_the_provider_still_sees_at_most_the_budget() -> None:
    # A 1.5 s stall of the sender's loop: counted when a worker was let go rather than at the
    # write, 18 arrived in one second.
    with OwnLoopServer() as server:
        client = LimitedClient(
            "aihc",
            "t",
            Limits(requests_per_second=10, max_concurrency=8, retries=0),
            SelfMetrics(),
        )
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, time.sleep, 1.5)
        try:
            await asyncio.gather(
                *(
                    client.fetch("thing", lambda: PreparedRequest("GET", server.url), lambda r: r)
                    for _ in range(40)
                )
            )
        finally:
            await client.close()
    assert len(server.arrivals) == 40
    assert busiest_window(server.arrivals) <= 11
