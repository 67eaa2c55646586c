"""Fake AIHC and Alaya services on loopback, for the demo, the tests and the benchmarks.

They implement the endpoints the provider pages describe, check credentials the way the real
services do (AIHC bce-auth-v1 signatures, Alaya bearer keys; 403 when wrong), serve seeded,
deterministic data, and inject faults on request (`Faults`).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from exporter.simulator.aihc import AihcWorld, register_aihc
from exporter.simulator.alaya import AlayaWorld, register_alaya
from exporter.simulator.core import Faults, LoggedRequest, RequestLog, fault_middleware

__all__ = [
    "AihcWorld",
    "AlayaWorld",
    "Faults",
    "LoggedRequest",
    "RequestLog",
    "RunningSimulator",
    "Simulator",
    "running",
]


@dataclass
class Simulator:
    seed: int = 1
    aihc: AihcWorld | None = None
    alaya: AlayaWorld | None = None
    faults: Faults = field(default_factory=Faults)
    log: RequestLog = field(default_factory=RequestLog)

    def __post_init__(self) -> None:
        if self.aihc is None:
            self.aihc = AihcWorld(seed=self.seed)
        if self.alaya is None:
            self.alaya = AlayaWorld(seed=self.seed)

    def app(self) -> web.Application:
        rng = random.Random(self.seed)
        app = web.Application(middlewares=[fault_middleware(self.faults, self.log, rng)])
        assert self.aihc is not None and self.alaya is not None
        register_aihc(app, self.aihc)
        register_alaya(app, self.alaya)
        app.router.add_get("/-/healthy", _healthy)
        return app


async def _healthy(request: web.Request) -> web.Response:
    return web.Response(text="simulator is healthy\n")


@dataclass(frozen=True, slots=True)
class RunningSimulator:
    simulator: Simulator
    url: str


@asynccontextmanager
async def running(
    simulator: Simulator, host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[RunningSimulator]:
    """Serve `simulator` on host:port (0: any free port) for the duration of the block."""
    runner = web.AppRunner(simulator.app(), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        yield RunningSimulator(simulator, f"http://{shown}:{bound[1]}")
    finally:
        await runner.cleanup()
