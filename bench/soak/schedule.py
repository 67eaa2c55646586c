"""The chaos schedule: what goes wrong, when, for how long, and whom it hits. Seeded.

Every kind of fault happens once per run, in a slot of its own (no two at once, so each
check can say which fault it saw), between the first and the last tenth of the run; the
exporter's restart near the middle (in a run of a few hours, near the end), the wall-clock
step right before it (the restart sets the clock right again). Durations are a day's: in a
shorter run they shrink with it.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import Final

AIHC_ENDPOINTS: Final = ("DescribeJobs", "DescribeJob", "DescribeJobMetrics", "events")
ALAYA_ENDPOINTS: Final = ("gpu-metrics", "basic", "list")
LISTS: Final = ("DescribeJobs", "list")

AIHC, FILE, LIST = "soak-aihc", "soak-alaya-file", "soak-alaya-list"
TARGETS: Final = (AIHC, FILE, LIST)
# Which targets a fault on these endpoints reaches.
REACH: Final = {
    "DescribeJobs": (AIHC,),
    "DescribeJob": (AIHC,),
    "DescribeJobMetrics": (AIHC,),
    "events": (AIHC,),
    "gpu-metrics": (FILE, LIST),
    "basic": (FILE, LIST),
    "list": (LIST,),
}
DAY: Final = 86400.0


@dataclass(frozen=True)
class Episode:
    kind: str
    start: float  # seconds from the run's start
    duration: float
    # The simulator's fault knobs during the episode (`exporter.simulator.chaos`), if any.
    faults: dict[str, object] = field(default_factory=dict)
    # Whether the targets it reaches should go down (up 0) during it.
    failing: bool = True
    note: str = ""
    # How long the fault knobs stay set (None: the whole episode).
    knobs_for: float | None = None

    @property
    def end(self) -> float:
        return self.start + self.duration

    @property
    def knobs_off(self) -> float:
        """When the fault knobs are to be cleared."""
        return self.start + (self.knobs_for if self.knobs_for is not None else self.duration)

    @property
    def targets(self) -> tuple[str, ...]:
        only = self.faults.get("only")
        if not isinstance(only, list | tuple):
            return TARGETS if self.faults else ()
        return tuple(t for t in TARGETS if any(t in REACH[e] for e in only))


def kinds(scale: float, timeout: float) -> list[Episode]:
    """Every fault once, at `scale` of a day's durations (start times set later)."""

    def d(seconds: float) -> float:
        return max(120.0, seconds * scale)

    return [
        Episode(
            "5xx burst",
            0,
            d(1800),
            {"error_rates": {500: 1.0}, "only": AIHC_ENDPOINTS},
            note="AIHC answers 500, echoing every credential in its message",
        ),
        Episode(
            "hang past timeout",
            0,
            d(1800),
            {"hang_rate": 1.0, "hang_seconds": 2 * timeout, "only": ("gpu-metrics", "basic")},
            note=f"Alaya's per-pod calls hang {2 * timeout:.0f} s",
        ),
        Episode(
            "429 Retry-After",
            0,
            600 + 180,
            {"error_rates": {429: 1.0}, "retry_after": "600", "only": AIHC_ENDPOINTS},
            knobs_for=60.0,
            note="AIHC answers 429 with Retry-After (600 s in a day's run) for a minute",
        ),
        Episode(
            "slow replies",
            0,
            d(1800),
            {"latency": timeout / 4},
            failing=False,
            note=f"every reply {timeout / 4:.1f} s late",
        ),
        Episode(
            "malformed replies",
            0,
            d(1800),
            {"malformed_rate": 0.3},
            note="30 % of replies cut in half",
        ),
        Episode(
            "oversized replies",
            0,
            d(1800),
            {
                "oversized_rate": 0.2,
                "oversized_bytes": 16 << 20,
                "only": ("DescribeJobMetrics", "gpu-metrics"),
            },
            note="20 % of metric replies 16 MiB",
        ),
        Episode(
            "listing outage",
            0,
            d(3600),
            {"error_rates": {503: 1.0}, "only": LISTS},
            note="both job lists answer 503",
        ),
        Episode(
            "credential rotation",
            0,
            480,
            failing=False,
            note="new keys valid; exporter reloads them (SIGHUP); old keys refused",
        ),
        Episode(
            "bad reload",
            0,
            480,
            failing=False,
            note="a config file that does not validate, SIGHUP; then the good one",
        ),
        Episode(
            "wall-clock step",
            0,
            300,
            failing=False,
            note="the exporter's clocks jump 30 s ahead (until its restart)",
        ),
        Episode("restart", 0, 300, failing=False, note="SIGTERM, then the exporter again"),
    ]


def schedule(seed: int, run: float, timeout: float) -> list[Episode]:
    """The run's episodes, in time order: one slot each between 10 % and 90 % of `run`."""
    rng = random.Random(seed)
    episodes = kinds(min(1.0, run / DAY), timeout)
    fixed = {e.kind: e for e in episodes if e.kind in ("restart", "wall-clock step")}
    others = [e for e in episodes if e.kind not in fixed]
    rng.shuffle(others)
    # The restart in mid-day; in a run of hours, late, so the first process runs 90 minutes
    # (the memory check's least).
    half = len(others) // 2 if run >= 6 * 3600 else len(others) - 1
    ordered = [*others[:half], fixed["wall-clock step"], fixed["restart"], *others[half:]]
    slot = 0.8 * run / len(ordered)
    placed = []
    for i, episode in enumerate(ordered):
        room = max(0.0, slot - episode.duration)
        start = 0.1 * run + i * slot + rng.uniform(0, room * 0.5)
        duration = min(episode.duration, slot * 0.95)
        faults = dict(episode.faults)
        if "retry_after" in faults:
            # The pause, and three minutes after it to come back, fit the slot.
            faults["retry_after"] = str(int(duration - 180))
        placed.append(
            dataclasses.replace(episode, start=round(start), duration=duration, faults=faults)
        )
    return placed


def clock(seconds: float) -> str:
    """Seconds from the run's start as h:mm."""
    minutes = int(seconds // 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def describe(episodes: list[Episode], seed: int) -> list[str]:
    lines = [f"chaos schedule (seed {seed}):"]
    for e in episodes:
        reach = ", ".join(e.targets) or "the exporter"
        lines.append(f"  {clock(e.start)}-{clock(e.end)}  {e.kind:<20} {reach}: {e.note}")
    return lines
