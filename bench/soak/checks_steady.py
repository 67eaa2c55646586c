"""The soak's checks of what holds over the whole run: each side's clock against the simulated
time it was read in, each process's memory, and the scrape's p99 and the exporter's CPU,
first hour against last.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable, Sequence

from bench.soak.evidence import WARM_UP, Check, Evidence, Window, hm, inside

MEMORY_GROWTH = 0.05


def _range(values: list[float]) -> str:
    if not values:
        return "no samples"
    return f"{min(values):+.2f}..{max(values):+.2f} s over {len(values)} samples"


def _p99(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100)[98]


def _grown(measured: Sequence[float], against_peer: Sequence[float]) -> float:
    """How much a figure grew from its first to its last window: the lesser of its growth as
    measured and against its peer, since the shared machine's moments move either alone."""

    def growth(first: float, last: float) -> float:
        return last / first if first else math.inf

    return min(growth(*measured), growth(*against_peer))


class SteadyChecks(Evidence):
    # -- clock -----------------------------------------------------------------------------

    def clocks(self) -> list[Check]:
        """Each side's clock against the span of simulated time it was read in: the
        simulator's exactly (10 ms of uptime each way); the exporter's Date header, a second
        that aiohttp renders once per second of its loop, so a busy loop's late second too.
        While the exporter's clock is stepped (from the step to its restart) it reads its
        offset from a file that libfaketime reads again every second, and a Date then lags at
        times, on a loaded machine (bench/README.md): that span shows that the step took, not
        how close the clocks are, so it has a row of its own, its median held to the step."""
        tolerance = 1.0 + 0.02 * self.r.speed
        late = 2.0 + 0.05 * self.r.speed
        sim = [s.sim_clock for s in self.r.samples if s.sim_clock is not None]
        # libfaketime reads a stepped offset again once more than a real second has passed.
        settling = [(t, t + 2.5 * self.r.speed) for t, _ in self.r.steps]
        exporter = [
            (s.at, s.exporter_clock - self._step_at(s.at))
            for s in self.r.samples
            if s.exporter_clock is not None and not inside(s.at, settling)
        ]
        restart = self.r.restart[1] if self.r.restart else math.inf
        stepped_at = min((t for t, o in self.r.steps if o), default=math.inf)
        before = [d for t, d in exporter if t < min(restart, stepped_at)]
        stepped = [d for t, d in exporter if stepped_at <= t < restart]
        after = [d for t, d in exporter if t >= restart]
        steps = ", ".join(f"{o:+.0f} s at {hm(t)}" for t, o in self.r.steps) or "none"

        def close(values: list[float], bound: float) -> bool:
            return bool(values) and max(map(abs, values)) <= bound

        typical = statistics.median(stepped) if stepped else 0.0
        return [
            Check(
                "clock: simulator vs expected",
                f"{_range(sim)} outside the span it was read in",
                f"within ±{tolerance:.1f} s",
                close(sim, tolerance),
            ),
            Check(
                "clock: exporter Date vs its request",
                f"{_range(before)} outside the request's span, before its step",
                f"within ±{late:.1f} s",
                close(before, late),
            ),
            Check(
                "clock: exporter while stepped",
                f"{_range(stepped)} beside its step ({steps}); median {typical:+.2f} s",
                f"the step seen: median within ±{late:.1f} s of it",
                not stepped or abs(typical) <= late,
            ),
            Check(
                "clock: exporter after its restart",
                f"{_range(after)} outside the request's span",
                f"within ±{late:.1f} s",
                self.r.restart is None or close(after, late),
            ),
        ]

    def _step_at(self, t: float) -> float:
        offset = 0.0
        for at, value in self.r.steps:
            if t >= at:
                offset = value
        return offset

    # -- memory ----------------------------------------------------------------------------

    def memory(self) -> list[Check]:
        checks = []
        for generation in sorted({s.generation for s in self.r.samples if s.generation}):
            mine = [s for s in self.r.samples if s.generation == generation and s.exporter_rss]
            rss = [(s.at, s.exporter_rss or 0) for s in mine]
            checks.append(self._growth(f"memory: exporter #{generation}", rss, min))
        collected = [(s.at, s.sim_rss or 0) for s in self.r.samples if s.collected and s.sim_rss]
        checks.append(self._growth("memory: simulator", collected, lambda xs: xs[0]))
        return checks

    def _growth(
        self, name: str, rss: list[tuple[float, int]], pick: Callable[[list[int]], int]
    ) -> Check:
        """RSS at the end against one hour after the start: the exporter's low point of a
        20-minute window (it collects its heap every 5 minutes), the simulator's figure right
        after a full collection."""
        if not rss or rss[-1][0] - rss[0][0] < 5400:
            ran = (rss[-1][0] - rss[0][0]) / 60 if rss else 0
            return Check(name, f"n/a: ran {ran:.0f} min, less than 90", "", True)
        first = rss[0][0] + 3600
        base = pick([k for t, k in rss if first - 600 <= t <= first + 600])
        end = min(k for t, k in rss if t >= rss[-1][0] - 1200)
        growth = end / base - 1
        figure = (
            f"{growth:+.1%}: {base / 1024:.1f} MiB at {hm(first)}, "
            f"{end / 1024:.1f} MiB at {hm(rss[-1][0])}"
        )
        return Check(name, figure, f"within {MEMORY_GROWTH:.0%}", growth <= MEMORY_GROWTH)

    # -- steadiness ------------------------------------------------------------------------

    def steadiness(self) -> list[Check]:
        """The first hour after the warm-up against the last, fault windows left out, and each
        against a peer measured in the same moments: a scrape's p99 against `/-/healthy`'s,
        the exporter's CPU against the simulator's (which serves the same calls)."""
        warm = self.r.listened + WARM_UP
        windows = ((warm, warm + 3600), (self.r.run - 3600, self.r.run))
        faults = self.fault_windows()
        scrapes = [
            [x for x in self.r.scrapes if x.ok and a <= x.at < b and not inside(x.at, faults)]
            for a, b in windows
        ]
        p99 = [_p99([x.seconds for x in xs]) for xs in scrapes]
        floor = [_p99([x.floor for x in xs if x.floor is not None]) for xs in scrapes]
        scrape = [p / f if f else math.inf for p, f in zip(p99, floor, strict=True)]
        cpu = [self._cpu(a, b, faults) for a, b in windows]
        ratio = [e / s if s else math.inf for e, s in cpu]
        return [
            Check(
                "steadiness: scrape p99",
                f"{p99[0] * 1000:.1f} ms ({scrape[0]:.1f} x /-/healthy) first hour, "
                f"{p99[1] * 1000:.1f} ms ({scrape[1]:.1f} x) last",
                "last <= 1.5 x first, as measured or against /-/healthy",
                _grown(p99, scrape) <= 1.5,
            ),
            Check(
                "steadiness: exporter CPU",
                f"{cpu[0][0]:.2f} s a simulated hour ({ratio[0]:.2f} x the simulator's) first, "
                f"{cpu[1][0]:.2f} s ({ratio[1]:.2f} x) last",
                "last <= 1.25 x first, as measured or against the simulator's",
                _grown([e for e, _ in cpu], ratio) <= 1.25,
            ),
        ]

    def _cpu(self, a: float, b: float, faults: list[Window]) -> tuple[float, float]:
        """CPU seconds per simulated hour of the exporter and of the simulator over [a, b),
        from consecutive samples of one exporter process outside fault windows."""
        spent, sim, span = 0.0, 0.0, 0.0
        samples = [s for s in self.r.samples if a <= s.at < b]
        for one, two in itertools.pairwise(samples):
            if one.generation != two.generation or not one.generation:
                continue
            if inside(one.at, faults) or inside(two.at, faults):
                continue
            if None in (one.exporter_cpu, two.exporter_cpu, one.sim_cpu, two.sim_cpu):
                continue
            spent += (two.exporter_cpu or 0.0) - (one.exporter_cpu or 0.0)
            sim += (two.sim_cpu or 0.0) - (one.sim_cpu or 0.0)
            span += two.at - one.at
        hours = span / 3600 if span else math.inf
        return spent / hours, sim / hours
