"""`Faults.latency` is the time to a reply, the reply's making included (as a real service's)."""

from __future__ import annotations

import asyncio
import contextlib
import random

import aiohttp
from aiohttp import web

from exporter.simulator.core import Faults, RequestLog, fault_middleware


async def test_the_reply_is_made_on_arrival_and_sent_when_the_latency_is_over(
    aiohttp_server,  # type: ignore[no-untyped-def]
) -> None:
    made = asyncio.Event()

    async def thing(request: web.Request) -> web.Response:
        made.set()
        return web.json_response({"ok": True})

    faults = Faults(latency=30)
    app = web.Application(middlewares=[fault_middleware(faults, RequestLog(), random.Random(1))])
    app.router.add_get("/thing", thing)
    server = await aiohttp_server(app)
    async with aiohttp.ClientSession() as session:
        reply = asyncio.create_task(session.get(server.make_url("/thing")))
        await asyncio.wait_for(made.wait(), 10)
        # Made, but not sent: the 30 s are not over.
        assert not reply.done()
        reply.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reply
