"""What the soak records: its samples, its scrapes, its visits of the status pages, and the
record of the whole run that the checks read (bench/soak/checks.py).

Times are simulated seconds since the exporter's first start (`Record.t0`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.soak.clock import SharedClock
from bench.soak.schedule import Episode
from exporter.simulator.tap import Tap


@dataclass
class Sample:
    at: float
    generation: int
    exporter_rss: int | None = None
    exporter_cpu: float | None = None
    sim_rss: int | None = None
    sim_cpu: float | None = None
    collected: bool = False
    up: dict[str, float] = field(default_factory=dict)
    aihc_jobs: set[str] = field(default_factory=set)
    pods: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    reload_ok: float | None = None
    refused: float = 0.0
    exporter_clock: float | None = None
    sim_clock: float | None = None
    secrets: list[str] = field(default_factory=list)


@dataclass
class Scrape:
    at: float
    gzip: bool
    seconds: float
    ok: bool
    up: dict[str, float] = field(default_factory=dict)
    # A `/-/healthy` right after it (identity scrapes only).
    floor: float | None = None


@dataclass
class Visit:
    """The status pages as fetched during an episode."""

    episode: Episode
    at: float
    targets: dict[str, dict[str, Any]]
    secrets: list[str]


@dataclass
class Record:
    run: float
    speed: float
    t0: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    scrapes: list[Scrape] = field(default_factory=list)
    visits: list[Visit] = field(default_factory=list)
    taps: dict[str, Tap] = field(default_factory=dict)
    bounds: dict[str, float] = field(default_factory=dict)
    steps: list[tuple[float, float]] = field(default_factory=list)
    restart: tuple[float, float] | None = None
    # When the exporter first listened: its start (imports, configuration) is minutes of
    # simulated time at 100 x, more on a loaded machine, and its warm-up counts from here.
    listened: float = 0.0
    exits: list[tuple[int | None, float]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    wall: float = 0.0
    # What the simulator answered the old keys after the rotation.
    old_keys: dict[str, int] = field(default_factory=dict)
    # CPU seconds of the simulator and of the soak itself (the exporter's are in the samples).
    cpu: dict[str, float] = field(default_factory=dict)
    # Episode -> when its fault knobs were sent, and when they were cleared (each just before
    # the call): a soak loop late to wake sets them late, and the lags are counted from these.
    knobs: dict[str, tuple[float, float]] = field(default_factory=dict)

    def dump(self, path: Path, clock: SharedClock) -> None:
        """The record as JSON, times in simulated seconds since the start (for a look after)."""

        def rel(boots: list[float]) -> list[float]:
            return [round(clock.sim(b) - self.t0, 1) for b in boots]

        document = {
            "samples": [dataclasses.asdict(s) for s in self.samples],
            "scrapes": [dataclasses.asdict(x) for x in self.scrapes],
            "visits": [
                {"kind": v.episode.kind, "at": v.at, "targets": v.targets} for v in self.visits
            ],
            "taps": {
                t: {"requests": rel(x.requests), "accepted": rel(x.accepted)}
                for t, x in self.taps.items()
            },
            "t0": self.t0,
        }
        path.write_text(json.dumps(document, default=sorted))
