"""Progress: on a terminal a tqdm bar (windows done of all, with its rate and time left, and
jobs, calls and points beside it); elsewhere (a CI log, a pipe) one plain line every
`PLAIN_EVERY` seconds, so a log holds a few hundred lines a day, not a redraw per window."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any, Final

from tqdm import tqdm

PLAIN_EVERY: Final = 5.0


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class Progress:
    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream or sys.stderr
        self._terminal = self._stream.isatty() if terminal is None else terminal
        self._clock = clock
        self.jobs_total = self.jobs_done = 0
        self.windows_total = self.windows_done = 0
        self.calls = self.points = 0
        self._started = clock()
        self._last_line = self._started
        self._bar: Any = None
        if self._terminal:
            self._bar = tqdm(total=0, unit="window", file=self._stream, dynamic_ncols=True)

    def add_jobs(self, count: int) -> None:
        self.jobs_total += count
        self._show()

    def add_windows(self, count: int) -> None:
        self.windows_total += count
        if self._bar is not None:
            self._bar.total = self.windows_total
        self._show()

    def window_done(self, points: int, calls: int) -> None:
        self.windows_done += 1
        self.points += points
        self.calls = calls
        if self._bar is not None:
            self._bar.update(1)
        self._show()

    def job_done(self, calls: int) -> None:
        self.jobs_done += 1
        self.calls = calls
        self._show()

    def left(self) -> float | None:
        """Seconds left at the rate so far; None before the first window."""
        if not self.windows_done:
            return None
        spent = self._clock() - self._started
        return spent / self.windows_done * (self.windows_total - self.windows_done)

    def line(self) -> str:
        left = self.left()
        return (
            f"backfill: jobs {self.jobs_done}/{self.jobs_total}, "
            f"windows {self.windows_done}/{self.windows_total}, calls {self.calls}, "
            f"points {self.points}, time left {'?' if left is None else _duration(left)}"
        )

    def _show(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(
                f"jobs {self.jobs_done}/{self.jobs_total} calls {self.calls} points {self.points}",
                refresh=False,
            )
            return
        now = self._clock()
        if now - self._last_line >= PLAIN_EVERY:
            self._last_line = now
            print(self.line(), file=self._stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            print(self.line(), file=self._stream, flush=True)


class SendProgress:
    """The same for remote write: samples done (sent, refused or kept back) of the round's,
    with requests and retries beside them."""

    def __init__(
        self,
        total: int,
        stream: IO[str] | None = None,
        *,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream or sys.stderr
        self._clock = clock
        self.total, self.done, self.requests, self.retries = total, 0, 0, 0
        self._last_line = clock()
        self._bar: Any = None
        if self._stream.isatty() if terminal is None else terminal:
            self._bar = tqdm(total=total, unit="sample", file=self._stream, dynamic_ncols=True)

    def update(self, samples: int, requests: int, retries: int) -> None:
        self.done += samples
        self.requests, self.retries = requests, retries
        if self._bar is not None:
            self._bar.update(samples)
            self._bar.set_postfix_str(f"requests {requests} retries {retries}", refresh=False)
            return
        now = self._clock()
        if now - self._last_line >= PLAIN_EVERY:
            self._last_line = now
            print(self.line(), file=self._stream, flush=True)

    def line(self) -> str:
        return (
            f"backfill: remote write: samples {self.done}/{self.total}, "
            f"requests {self.requests}, retries {self.retries}"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        else:
            print(self.line(), file=self._stream, flush=True)
