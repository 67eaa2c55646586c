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

from bench import synthetic
from exporter.config import Settings
from exporter.model import PollResult
from exporter.providers.base import PollContext
from exporter.server import STATE, build_app
from exporter.store import tune_gc


class SyntheticProvider:
    """Answers every poll with the synthetic pool, built afresh as a provider builds its
    result, and kept by nobody but the store."""

    def __init__(self, target: synthetic.Target, seed: int) -> None:
        self.provider = target.provider
        self.target = target.target
        self._plan = target
        self._seed = seed

    async def poll(self, context: PollContext) -> PollResult:
        return synthetic.poll_result(self._plan, self._seed)

    async def close(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {"jobs": str(len(self._plan.job_ids))}


async def serve(series: int, seed: int) -> None:
    tune_gc()  # as exporter.cli.serve does
    providers = [SyntheticProvider(t, seed) for t in synthetic.plan(series, seed)]
    # One poll per target through the real scheduler, merge and store; no second one.
    settings = Settings(poll_interval=86400)
    app = build_app(settings, providers=providers)  # type: ignore[arg-type]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    state = app[STATE]
    assert state.scheduler is not None
    await state.scheduler.wait_ready(120)
    count = sum(s.series for s in state.store.view().snapshots.values())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"listening {port} {count}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_reader(sys.stdin.fileno(), lambda: _stop_at_eof(stop))
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def _stop_at_eof(stop: asyncio.Event) -> None:
    if not sys.stdin.read(1):
        stop.set()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(serve(args.series, args.seed))


if __name__ == "__main__":
    main()
