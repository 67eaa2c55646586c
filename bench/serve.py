"""The real exporter app, no targets, its store filled with a synthetic pool; for bench/scrape.py.

`python -m bench.serve --series N` listens on 127.0.0.1 (port 0), prints `listening PORT
SERIES`, and serves until SIGTERM or stdin closes; a `poll` line on stdin reads every job once
more (new values), then it prints `polled`; a `settle` line runs a round of the heap's keeper
at once (a full collection), then prints `settled MS FOUND CPU_MS` (its pause, the unreachable
objects it found, its CPU time); a `pauses` line prints the loop's lags and the collections
since the last one (`bench/pauses.py`). `--churn N` gives N jobs new values every second
(round robin over the pool, each job's parts made in a step of the loop, merged and packed in
threads as a runner's publish does): the pool changing under the scrapes, as the work queue
changes it. Run in its own process so that the load generator and the measured interpreter
share nothing.

Reads come as a runner publishes them: in checkpoints (`--checkpoint` jobs each; by default a
twentieth of a target's jobs, about what a runner's 15 s checkpoint brings at 1,000 AIHC jobs
and 40 requests/s), each merged, packed and swapped into the store, and rendered before the
next. `--checkpoint 0` reads every job of a target at once, in one listing through the real
scheduler, as a small pool's round does.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
import sys
import time

from aiohttp import web

from bench import synthetic
from bench.pauses import Pauses
from exporter.config import Settings
from exporter.heap import Heap, release_memory, tune_runtime
from exporter.model import Reading, Update, merge
from exporter.server import STATE, ExporterState, build_app
from exporter.store import SnapshotStore, share_labels


class SyntheticProvider(synthetic.ListedProvider):
    """Answers every round with the synthetic pool, built afresh as a provider builds its
    parts, and kept by nobody but the store; `listed` False: with no job (the reads come in
    checkpoints, `read_all`)."""

    def __init__(self, target: synthetic.Target, seed: int, listed: bool = True) -> None:
        super().__init__(target.provider, target.target)
        self._plan = target
        self._seed = seed
        self._polls = 0
        self._listed = listed

    def parts(self) -> synthetic.Parts:
        # The same jobs and pods every poll, new values.
        self._polls += 1
        if not self._listed:
            return {}
        return synthetic.job_parts(self._plan, self._seed + self._polls)

    def describe(self) -> dict[str, str]:
        return {"jobs": str(len(self._plan.job_ids))}


async def serve(series: int, seed: int, churn: int, checkpoint: int | None) -> None:
    heap = tune_runtime()  # as exporter.cli.serve does, its keeper included
    keeper = asyncio.create_task(heap.keep(lambda exc: print(f"heap keeper: {exc!r}", flush=True)))
    pauses = Pauses()
    pauses.install()
    watcher = asyncio.create_task(pauses.watch())
    targets = synthetic.plan(series, seed)
    providers = [SyntheticProvider(t, seed, listed=checkpoint == 0) for t in targets]
    # One round per target through the real scheduler, merge and store; no second one.
    settings = Settings(poll_interval=86400)
    app = build_app(settings, providers=providers)  # type: ignore[arg-type]
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    state = app[STATE]
    assert state.scheduler is not None
    await state.scheduler.wait_ready(120)
    reads = Reads(state, targets, checkpoint)
    if checkpoint != 0:
        # What the scheduler would publish from here on is the reads published below.
        await state.scheduler.stop()
        await reads.all(seed)
    count = sum(s.series for s in state.store.view().snapshots.values())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    pauses.reset()
    print(f"listening {port} {count}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    polls: set[asyncio.Task[None]] = set()
    if churn:
        task = loop.create_task(change_jobs(state.store, targets, churn, seed))
        polls.add(task)

    def command() -> None:
        line = sys.stdin.readline()
        if not line:
            stop.set()
        elif line.strip() == "poll":
            task = loop.create_task(reads.again())
            polls.add(task)
            task.add_done_callback(polls.discard)
        elif line.strip() == "pauses":
            print(pauses.line(), flush=True)
        elif line.strip() == "settle":
            task = loop.create_task(settle(heap))
            polls.add(task)
            task.add_done_callback(polls.discard)

    loop.add_reader(sys.stdin.fileno(), command)
    try:
        await stop.wait()
    finally:
        loop.remove_reader(sys.stdin.fileno())
        keeper.cancel()
        watcher.cancel()
        await runner.cleanup()


class Reads:
    """Every job of every target read again, new values each time: in checkpoints, or (with
    `checkpoint` 0) in one round of each target's runner."""

    def __init__(
        self, state: ExporterState, targets: tuple[synthetic.Target, ...], checkpoint: int | None
    ) -> None:
        self._state = state
        self._targets = targets
        self._checkpoint = checkpoint
        self._polls = 0

    async def again(self) -> None:
        """One more read of every job; then say so."""
        self._polls += 1
        if self._checkpoint == 0:
            assert self._state.scheduler is not None
            for runner in self._state.scheduler.runners:
                await runner.round()
        else:
            await self.all(self._polls * 1000)
        print("polled", flush=True)

    async def all(self, seed: int) -> None:
        """Every part of every job read afresh (values from `seed`), published in checkpoints
        as a runner publishes its reads (merged, packed and swapped), each rendered before the
        next."""
        store, exposition = self._state.store, self._state.exposition
        for target in self._targets:
            wanted = synthetic.part_names(target)
            ids = [*([""] if "" in wanted else []), *target.job_ids]
            step = self._checkpoint or max(1, len(target.job_ids) // 20)
            for start in range(0, len(ids), step):
                update = Update(wanted, True, {})
                for job, parts in synthetic.job_parts(
                    target, seed, ids[start : start + step]
                ).items():
                    for part, samples in parts.items():
                        update.put(job, part, Reading(samples, "fast"))
                previous = store.get(target.provider, target.target)
                store.swap(merge(previous, update, synthetic.NOW, synthetic.BOUNDS).snapshot)
                del update
                await exposition.holds(store.view().version, math.inf)


async def settle(heap: Heap) -> None:
    """A keeper's round now (in a thread, as `Heap.keep` runs it), whatever the period."""

    def run() -> tuple[float, float, int]:
        started, cpu = time.perf_counter(), time.thread_time()
        found = heap.collect()
        pause, cpu = time.perf_counter() - started, time.thread_time() - cpu
        release_memory()
        return pause, cpu, found

    pause, cpu, found = await asyncio.to_thread(run)
    print(f"settled {pause * 1000:.1f} {found} {cpu * 1000:.1f}", flush=True)


async def change_jobs(
    store: SnapshotStore, targets: tuple[synthetic.Target, ...], per_second: int, seed: int
) -> None:
    """Every second, new values for the next `per_second` jobs, one publish per target touched.

    As the exporter does it: each job's parts are made in a loop step of their own (a runner
    parses each reply in the step that received it, never a second's reads at once), and the
    merge and the label sharing run in threads, as `Publisher.publish` runs them."""
    jobs = [(t, job) for t in targets for job in t.job_ids]
    at = 0
    while True:
        await asyncio.sleep(1)
        chosen: dict[synthetic.Target, list[str]] = {}
        for _ in range(min(per_second, len(jobs))):
            target, job = jobs[at % len(jobs)]
            chosen.setdefault(target, []).append(job)
            at += 1
        for target, ids in chosen.items():
            update = Update(None, True, {})
            for job_id in ids:
                for job, job_parts in synthetic.job_parts(target, seed + at, [job_id]).items():
                    for part, samples in job_parts.items():
                        update.put(job, part, Reading(samples, "fast"))
                await asyncio.sleep(0)
            previous = store.get(target.provider, target.target)
            outcome = await asyncio.to_thread(
                merge, previous, update, synthetic.NOW, synthetic.BOUNDS
            )
            snapshot = await asyncio.to_thread(share_labels, outcome.snapshot, previous)
            store.swap(snapshot, shared=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--series", type=int, required=True)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--churn", type=int, default=0, help="jobs given new values per second")
    parser.add_argument(
        "--checkpoint",
        type=int,
        help="jobs read per checkpoint (default: a twentieth of a target's; 0: all in one round)",
    )
    args = parser.parse_args()
    asyncio.run(serve(args.series, args.seed, args.churn, args.checkpoint))


if __name__ == "__main__":
    main()
