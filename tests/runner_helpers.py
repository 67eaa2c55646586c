"""Stepping a `TargetRunner`'s own loop on simulated time, beside real sockets.

A runner built with a `SteppedClock` (its `clock` and `sleep`, through `build_app` or the
runner's constructor) keeps its rounds, its queue's releases and its parts' ages on that clock,
which moves only when the test moves it. Its calls still go over real sockets on the real loop.

`poll_once` is what these tests call "one poll": end the round in progress and run one in which
every item is read, then end that one too, so that its outcomes are published and `up` says how
it went. Between steps it waits until the runners are `quiet`: their round loops and every
worker asleep on the clock, nothing in flight.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from exporter.config import Settings
from exporter.server import STATE, build_app
from exporter.work.runner import TargetRunner

# How long `quiet` waits for the runner's calls and publishes, in real seconds.
QUIET_TIMEOUT = 30.0


class SteppedClock:
    """A monotonic clock that moves only by `advance`; `sleep` wakes as it passes.

    It starts at `time.monotonic()`, so deadlines on it stay ahead of the real clock that the
    transport's pacing keeps."""

    def __init__(self) -> None:
        self.now = time.monotonic()
        self._order = itertools.count()
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._order), woken))
        await woken

    @property
    def sleeping(self) -> int:
        """Sleepers not woken yet (nor cancelled)."""
        self._sleepers = [s for s in self._sleepers if not s[2].done()]
        heapq.heapify(self._sleepers)
        return len(self._sleepers)

    def advance(self, seconds: float) -> None:
        """Move on by `seconds`, waking every sleeper whose time came."""
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, woken = heapq.heappop(self._sleepers)
            if not woken.done():
                woken.set_result(None)


async def quiet(runners: Sequence[TargetRunner], clock: SteppedClock) -> None:
    """Until the round loop and each worker of every runner on `clock` sleep on it, twice in
    a row a few turns of the loop apart: nothing of theirs is running or in flight. Workers
    held by refused credentials wait for the next round instead, off the clock: then sleepers
    unchanged for a while are rest."""
    deadline = time.monotonic() + QUIET_TIMEOUT
    resting = sum(runner.workers + 1 for runner in runners)
    calm = 0
    while True:
        assert time.monotonic() < deadline, "the runners never came to rest"
        await asyncio.sleep(0.002)
        asleep = clock.sleeping
        if asleep == resting:
            calm, needed = calm + 1, 2
        elif any(r.provider.gate.blocked for r in runners) and asleep >= len(runners):
            calm, needed = calm + 1, 20
        else:
            calm, needed = 0, 2
        if calm >= needed:
            return


async def poll_once(runner: TargetRunner, clock: SteppedClock) -> None:
    """One poll of `runner`, the only one on `clock` (`poll_all`)."""
    await poll_all([runner], clock)


async def poll_all(runners: Sequence[TargetRunner], clock: SteppedClock) -> None:
    """One poll of every runner on `clock`: the rounds in progress end, then one round of each
    reads every item (the slowest tier's interval has passed) and ends: its outcomes are
    published and `up` set by it."""
    await quiet(runners, clock)
    clock.advance(max(max(r.plan.effective.values()) for r in runners))
    await quiet(runners, clock)
    clock.advance(max(r.plan.effective["fast"] for r in runners))
    await quiet(runners, clock)


async def poll_app(app: web.Application) -> None:
    """`poll_all` for the app's runners, built on its `SteppedClock` (`stepped_app`)."""
    state = app[STATE]
    assert isinstance(state.clock, SteppedClock) and state.scheduler is not None
    await poll_all(state.scheduler.runners, state.clock)


def stepped_app(settings: Settings, **given: Any) -> web.Application:
    """`build_app` with its runners on a `SteppedClock` of their own."""
    clock = SteppedClock()
    return build_app(settings, clock=clock, sleep=clock.sleep, **given)
