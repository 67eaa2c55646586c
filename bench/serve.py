"""The real exporter app, no targets, its store filled with a synthetic pool; for bench/scrape.py.

`python -m bench.serve --series N` listens on 127.0.0.1 (port 0), prints `listening PORT
SERIES`, and serves until SIGTERM or stdin closes. Run in its own process so that the load
generator and the measured interpreter share nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from aiohttp import web

from bench.synthetic import fill
from exporter.config import Settings
from exporter.server import STATE, build_app


async def serve(series: int, seed: int) -> None:
    app = build_app(Settings(web={"listen_address": "127.0.0.1:0"}))
    state = app[STATE]
    count = fill(state.store, series, seed)
    for (provider, target), snapshot in state.store.view().snapshots.items():
        state.metrics.register_target(provider, target)
        state.metrics.up.labels(provider, target).set(1)
        state.metrics.series.labels(provider).set(snapshot.series)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"listening {port} {count}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_reader(sys.stdin.fileno(), lambda: sys.stdin.read(1) or stop.set())
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(serve(args.series, args.seed))


if __name__ == "__main__":
    main()
