"""Fake provider services on loopback, for the demo, the tests and the benchmarks.

Every registered provider's fake (`exporter.simulator.services`; AIHC's and Alaya's are the
`aihc*` and `alaya*` modules here: the world, its HTTP API, how the demo serves it) implements
the endpoints its provider pages describe, checks credentials the way the real service does
(AIHC bce-auth-v1 signatures, Alaya bearer keys; 403 when wrong) and serves seeded,
deterministic data; a middleware in front of them injects faults on request (`Faults`).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from exporter.simulator.core import Faults, LoggedRequest, RequestLog, fault_middleware
from exporter.simulator.services import simulated

__all__ = [
    "Faults",
    "LoggedRequest",
    "RequestLog",
    "RunningSimulator",
    "Simulator",
    "running",
]


class Simulator:
    """Every registered provider's fake on one application (`services`), each serving its
    world: the one given by the provider's name (`Simulator(aihc=AihcWorld.fixed(...))`), else
    its default world for `seed`. `simulator.aihc` is that world."""

    def __init__(
        self,
        seed: int = 1,
        *,
        faults: Faults | None = None,
        log: RequestLog | None = None,
        **worlds: Any,
    ) -> None:
        services = simulated()
        unknown = sorted(set(worlds) - set(services))
        if unknown:
            raise TypeError(f"no simulated provider {unknown[0]!r} (have {sorted(services)})")
        self.seed = seed
        self.faults = faults if faults is not None else Faults()
        self.log = log if log is not None else RequestLog()
        self.worlds: dict[str, Any] = {
            name: worlds[name] if worlds.get(name) is not None else service.world(seed)
            for name, service in services.items()
        }

    def __getattr__(self, name: str) -> Any:
        worlds = self.__dict__.get("worlds", {})
        if name in worlds:
            return worlds[name]
        raise AttributeError(name)

    def app(self) -> web.Application:
        rng = random.Random(self.seed)
        app = web.Application(middlewares=[fault_middleware(self.faults, self.log, rng)])
        for name, service in simulated().items():
            service.register(app, self.worlds[name])
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
