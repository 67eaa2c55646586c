"""The simulator's control port: faults, credentials and its own figures, set from outside.

`training-job-exporter simulate --control HOST:PORT` serves this beside the provider APIs, on
a port of its own (so the fault middleware and the request log never see it). A benchmark
that runs the simulator as a process, on a clock it does not own (libfaketime), drives its
faults through it (`bench/soak`):

- `POST /faults`: the fault knobs (`exporter.simulator.core.Faults`) from a JSON object of
  their fields; `{}` clears them all. `only` is a list of endpoint names; `error_rates` maps a
  status to its share; `message` is the text of the simulated error replies.
- `POST /credentials`: `{"aihc": {access key id: secret key, ...}, "alaya": [api key, ...]}`:
  the keys each fake accepts from now on (Alaya's first one is its own, the rest accepted too).
- `GET /stats[?collect=1]`: the simulator's clock (`time`, faked or not) between two reads of
  the machine's uptime (never faked: `uptime`, `uptime_after`), requests served, and its
  resident memory, after a full collection and giving free pages back when `collect` is set.
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

from aiohttp import web

from exporter.simulator import Simulator
from exporter.simulator.core import Faults

_FIELDS = {f.name for f in dataclasses.fields(Faults)} - {"script"}


def faults_from(data: dict[str, Any]) -> Faults:
    """Faults with the given fields (the rest at their defaults)."""
    unknown = set(data) - _FIELDS
    if unknown:
        raise web.HTTPBadRequest(text=f"unknown fault fields: {sorted(unknown)}\n")
    values = dict(data)
    if "error_rates" in values:
        values["error_rates"] = {int(k): float(v) for k, v in values["error_rates"].items()}
    if values.get("only") is not None:
        values["only"] = frozenset(values["only"])
    return Faults(**values, script=deque())


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def uptime() -> float:
    """Seconds since boot from /proc/uptime: a clock libfaketime does not fake."""
    return float(Path("/proc/uptime").read_text().split()[0])


def _collect() -> None:
    gc.collect()
    with suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def control_app(simulator: Simulator) -> web.Application:
    async def set_faults(request: web.Request) -> web.Response:
        fresh = faults_from(await request.json())
        for name in _FIELDS:
            setattr(simulator.faults, name, getattr(fresh, name))
        return web.json_response({"ok": True})

    async def set_credentials(request: web.Request) -> web.Response:
        data = await request.json()
        aihc, alaya = simulator.worlds.get("aihc"), simulator.worlds.get("alaya")
        if "aihc" in data and aihc is not None:
            aihc.credentials = dict(data["aihc"])
        if data.get("alaya") and alaya is not None:
            alaya.api_key, *rest = data["alaya"]
            alaya.also_accepted = tuple(rest)
        return web.json_response({"ok": True})

    async def stats(request: web.Request) -> web.Response:
        if request.query.get("collect"):
            _collect()
        before = uptime()
        now = time.time()
        after = uptime()
        return web.json_response(
            {
                "uptime": before,
                "time": now,
                "uptime_after": after,
                "served": simulator.log.served,
                "rss_kib": rss_kib(),
            }
        )

    app = web.Application()
    app.router.add_post("/faults", set_faults)
    app.router.add_post("/credentials", set_credentials)
    app.router.add_get("/stats", stats)
    return app


@asynccontextmanager
async def controlled(simulator: Simulator, host: str, port: int) -> AsyncIterator[str]:
    """Serve the control port for `simulator` for the duration of the block; its URL."""
    runner = web.AppRunner(control_app(simulator), access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        yield f"http://{bound[0]}:{bound[1]}"
    finally:
        await runner.cleanup()
