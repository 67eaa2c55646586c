"""The request budget: requests_per_second holds as the provider sees it, and costs no more,
even when the sender's event loop stalls between a request's slot and its write."""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time

from aiohttp import web

from exporter.config import Limits
from exporter.providers.aihc import AihcProvider
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.core import busiest_window
from exporter.targets import tier_plan
from exporter.transport.iface import PreparedRequest
from exporter.transport.limited import LimitedClient
from exporter.transport.limiter import RequestBudget
from exporter.work.oneshot import read_all
from tests.target_helpers import aihc_target

TYPES = [
    "GpuUsage", "GpuMemoryUsage", "CpuUsage", "MemoryUsage", "CpuTime", "MemoryAllocation",
    "DiskReadRate", "DiskWriteRate", "RDMASendDataRate", "RDMARecvDataRate", "PCIESendDataRate",
    "PCIERecvDataRate", "NVLinkSendDataRate", "NVLinkRecvDataRate", "GpuTemperature",
    "GpuPowerUsage", "GpuPipeTensorUsage", "RDMAHealth", "RDMASendErrorRate", "RDMARecvErrorRate",
]  # fmt: skip


async def test_twenty_per_second_over_two_hundred_calls() -> None:
    # 2 list pages + 9 jobs x (1 detail + 20 metric types + 1 events) = 200 calls.
    simulator = Simulator(seed=5, aihc=AihcWorld.fixed(jobs=9, pods_per_job=2))
    async with running(simulator) as served:
        target = aihc_target(
            served.url,
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
    assert result.ok
    assert simulator.log.count() == 200
    busiest = simulator.log.max_in_window(1.0)
    assert busiest <= 21, f"{busiest} requests within one second"
    assert took <= 1.15 * 10, f"the poll took {took:.2f} s"


async def test_the_cap_holds_where_requests_are_written_whatever_delays_them_after_the_slot() -> (
    None
):
    # Between its slot and its write a request can wait (a connection, a busy event loop):
    # 0-300 ms here. Counted at the slot, one second of writes held 24.
    budget = RequestBudget(20)
    rng = random.Random(3)
    written: list[float] = []

    async def one() -> None:
        await budget.acquire()
        await asyncio.sleep(rng.uniform(0, 0.3))
        await budget.admit()
        written.append(time.monotonic())

    started = time.monotonic()
    await asyncio.gather(*(one() for _ in range(80)))
    assert busiest_window(written) <= 20
    assert time.monotonic() - started >= (80 - 20) / 20


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
    # A 1.5 s stall lets 15 slots of the grid pass; at most 0.25 s of them are caught up, at
    # twice the pace. With slots reserved ahead and counted when they came: 18 in a second.
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
                    client.call("thing", lambda: PreparedRequest("GET", server.url))
                    for _ in range(40)
                )
            )
        finally:
            await client.close()
    assert len(server.arrivals) == 40
    assert busiest_window(server.arrivals) <= 11


async def test_slots_go_in_the_order_they_were_asked_for() -> None:
    # Eight workers asking again as soon as they have a slot, as the runner's do: each waits
    # behind at most the seven others, never for a lucky wake-up.
    budget = RequestBudget(100)
    asked = itertools.count()
    order: list[int] = []

    async def worker() -> None:
        for _ in range(25):
            ticket = next(asked)
            await budget.acquire()
            order.append(ticket)

    await asyncio.gather(*(worker() for _ in range(8)))
    assert order == sorted(order)
