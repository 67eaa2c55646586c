"""What every check of the soak reads, and what it returns: `Check`, a figure beside its goal,
and `Evidence`, the run's record with the episodes, the worlds and the shared clock, and the
fault windows and times the checks derive from them.

Times are simulated seconds since the exporter's first start. A *fault window* is an episode
and the time it takes to show it ended (`RECOVERY`: the round under way at its end, the
round after it, a checkpoint and a scrape); checks that ask for the quiet state (every job
exported, `up` 1, few connections) skip those windows, checks that ask for bounds (nothing
beyond the stale bound, no call in a pause, no secret) never do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from bench.soak.clock import SharedClock
from bench.soak.expect import Expected
from bench.soak.procs import ROUND, TIMEOUT
from bench.soak.record import Record
from bench.soak.schedule import AIHC, Episode
from bench.soak.tasks import SCRAPE

CHECKPOINT = 15.0
# A call under way when a fault ends can still fail until its timeout; `up` is 1 again at the
# end of the first round without a failure, which a scrape then shows.
RECOVERY = 2 * ROUND + TIMEOUT + SCRAPE + CHECKPOINT
# How long the exporter is given to come up and read every job once.
WARM_UP = 2 * RECOVERY

Window = tuple[float, float]


@dataclass
class Check:
    name: str
    figure: str
    goal: str
    met: bool

    def line(self) -> str:
        verdict = "met" if self.met else "MISSED"
        return f"  {self.name:<40} {self.figure}\n  {'':<40} goal {self.goal}: {verdict}"


def hm(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def inside(t: float, windows: Iterable[Window]) -> bool:
    return any(a <= t <= b for a, b in windows)


class Evidence:
    def __init__(
        self, record: Record, episodes: list[Episode], expected: Expected, clock: SharedClock
    ) -> None:
        self.r = record
        self.episodes = episodes
        self.expected = expected
        self.clock = clock
        self.t0 = record.t0

    # -- windows ---------------------------------------------------------------------------

    def fault_windows(self, target: str | None = None) -> list[Window]:
        """Every episode reaching `target` (any, when None; the exporter-wide ones always),
        the restart, and the warm-up from the exporter's first listening, each until its
        effect is over."""
        windows = [(0.0, self.r.listened + WARM_UP)]
        for e in self.episodes:
            if target is None or target in e.targets or not e.faults:
                windows.append((e.start, self.effective_end(e) + RECOVERY))
        if self.r.restart is not None:
            windows.append((self.r.restart[0], self.r.restart[1] + WARM_UP))
        return windows

    def late(self, e: Episode) -> tuple[float, float]:
        """How late the soak's loop sent an episode's fault knobs, and cleared them (at
        100 x, a loop 10 ms late to wake is a simulated second)."""
        sent, cleared = self.r.knobs.get(e.kind, (e.start, e.knobs_off))
        return max(0.0, sent - e.start), max(0.0, cleared - e.knobs_off)

    def effective_start(self, e: Episode) -> float:
        """When an episode's knobs were sent."""
        return e.start + self.late(e)[0]

    def effective_end(self, e: Episode) -> float:
        """When an episode's effect ends: when its knobs were cleared; a Retry-After pause
        runs from its first 429."""
        cleared = e.end + self.late(e)[1]
        if e.kind != "429 Retry-After":
            return cleared
        first = self.first_request(AIHC, e.start)
        return max(cleared, (first or e.start) + float(str(e.faults["retry_after"])))

    def first_request(self, target: str, after: float) -> float | None:
        later = [t for t in self.requests(target) if t >= after]
        return min(later) if later else None

    def requests(self, target: str) -> list[float]:
        return [self.rel(b) for b in self.r.taps[target].requests]

    def accepted(self, target: str) -> list[float]:
        return [self.rel(b) for b in self.r.taps[target].accepted]

    def rel(self, boot: float) -> float:
        return self.clock.sim(boot) - self.t0

    # -- logs ------------------------------------------------------------------------------

    def log_times(self) -> list[tuple[float | None, dict[str, object]]]:
        return [(self._log_time(line), line) for line in self.r.logs]

    def _log_time(self, line: dict[str, object]) -> float | None:
        stamp = line.get("timestamp")
        if not isinstance(stamp, str):
            return None
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - self.t0
