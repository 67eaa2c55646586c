"""The real exporter app, no targets, its store filled with a synthetic pool; for bench/scrape.py.

`python -m bench.serve --series N` listens on 127.0.0.1 (port 0), prints `listening PORT
SERIES`, and serves until SIGTERM or stdin closes; a `poll` line on stdin polls every target
once more (new values), then it prints `polled`. Run in its own process so that the load
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
from exporter.server import STATE, ExporterState, build_app
from exporter.store import tune_gc


class SyntheticProvider(synthetic.ListedProvider):
    """Answers every round with the synthetic pool, built afresh as a provider builds its
    parts, and kept by nobody but the store."""

    def __init__(self, target: synthetic.Target, seed: int) -> None:
        super().__init__(target.provider, target.target)
        self._plan = target
        self._seed = seed
        self._polls = 0

    def parts(self) -> synthetic.Parts:
        # The same jobs and pods every poll, new values.
        self._polls += 1
        return synthetic.job_parts(self._plan, self._seed + self._polls)

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
    polls: set[asyncio.Task[None]] = set()

    def command() -> None:
        line = sys.stdin.readline()
        if not line:
            stop.set()
        elif line.strip() == "poll":
            task = loop.create_task(poll_all(state))
            polls.add(task)
            task.add_done_callback(polls.discard)

    loop.add_reader(sys.stdin.fileno(), command)
    try:
        await stop.wait()
    finally:
        loop.remove_reader(sys.stdin.fileno())
        await runner.cleanup()


async def poll_all(state: ExporterState) -> None:
    """One more poll of every target, through the real poller; then say so."""
    assert state.scheduler is not None
    for runner in state.scheduler.runners:
        await runner.poll_once()
    print("polled", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, required=True)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(serve(args.series, args.seed))


if __name__ == "__main__":
    main()
