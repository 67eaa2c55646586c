"""What the soak checks, each printed as a figure beside its goal (`Check`).

Times are simulated seconds since the exporter's first start. A *fault window* is an episode
and the time it takes to show it ended (`RECOVERY`: the round under way at its end, the
round after it, a checkpoint and a scrape); checks that ask for the quiet state (every job
exported, `up` 1, few connections) skip those windows, checks that ask for bounds (nothing
beyond the stale bound, no call in a pause, no secret) never do.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from bench.soak.clock import SharedClock
from bench.soak.expect import FILE_AIDC, LIST_AIDC, Expected, Pods
from bench.soak.procs import CONCURRENCY, RATE, ROUND, SECRETS, TIMEOUT
from bench.soak.record import Record, Sample
from bench.soak.schedule import AIHC, LIST, TARGETS, Episode
from bench.soak.tasks import SCRAPE
from exporter.redaction import spellings

OUTAGES = ("5xx burst", "hang past timeout", "429 Retry-After", "listing outage")
# When a job the world lists is due on the exporter: its listing's round, its first reads, the
# publish after them and a scrape.
LAG = 2 * ROUND + SCRAPE
CHECKPOINT = 15.0
# A call under way when a fault ends can still fail until its timeout; `up` is 1 again at the
# end of the first round without a failure, which a scrape then shows.
RECOVERY = 2 * ROUND + TIMEOUT + SCRAPE + CHECKPOINT
# How long the exporter is given to come up and read every job once.
WARM_UP = 2 * RECOVERY
MEMORY_GROWTH = 0.05
EPISODE_LINES = 60
QUIET_LINES_PER_HOUR = 10

Window = tuple[float, float]
Pairs = set[tuple[str, str]]


@dataclass
class Check:
    name: str
    figure: str
    goal: str
    met: bool

    def line(self) -> str:
        verdict = "met" if self.met else "MISSED"
        return f"  {self.name:<40} {self.figure}\n  {'':<40} goal {self.goal}: {verdict}"


def _hm(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def _range(values: list[float]) -> str:
    if not values:
        return "no samples"
    return f"{min(values):+.2f}..{max(values):+.2f} s over {len(values)} samples"


def _p99(values: list[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100)[98]


def _pairs(found: Pods, *, jobs: bool) -> Pairs:
    """(job, pod) of every pod of `found`, and (job, "") of every job too when `jobs`."""
    pairs = {(j, p) for j, pods in found.items() for p in pods}
    return pairs | {(j, "") for j in found} if jobs else pairs


def _inside(t: float, windows: Iterable[Window]) -> bool:
    return any(a <= t <= b for a, b in windows)


def _grown(measured: Sequence[float], against_peer: Sequence[float]) -> float:
    """How much a figure grew from its first to its last window: the lesser of its growth as
    measured and against its peer, since the shared machine's moments move either alone."""

    def growth(first: float, last: float) -> float:
        return last / first if first else math.inf

    return min(growth(*measured), growth(*against_peer))


class Checks:
    def __init__(
        self, record: Record, episodes: list[Episode], expected: Expected, clock: SharedClock
    ) -> None:
        self.r = record
        self.episodes = episodes
        self.expected = expected
        self.clock = clock
        self.t0 = record.t0

    def all(self) -> list[Check]:
        return [
            *self.clocks(),
            *self.memory(),
            *self.series(),
            *self.up(),
            *self.budget(),
            *self.connections(),
            self.secrets(),
            *self.logs(),
            *self.steadiness(),
            *self.status_pages(),
            *self.lifecycle(),
        ]

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
            if s.exporter_clock is not None and not _inside(s.at, settling)
        ]
        restart = self.r.restart[1] if self.r.restart else math.inf
        stepped_at = min((t for t, o in self.r.steps if o), default=math.inf)
        before = [d for t, d in exporter if t < min(restart, stepped_at)]
        stepped = [d for t, d in exporter if stepped_at <= t < restart]
        after = [d for t, d in exporter if t >= restart]
        steps = ", ".join(f"{o:+.0f} s at {_hm(t)}" for t, o in self.r.steps) or "none"

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
            f"{growth:+.1%}: {base / 1024:.1f} MiB at {_hm(first)}, "
            f"{end / 1024:.1f} MiB at {_hm(rss[-1][0])}"
        )
        return Check(name, figure, f"within {MEMORY_GROWTH:.0%}", growth <= MEMORY_GROWTH)

    # -- series ----------------------------------------------------------------------------

    def series(self) -> list[Check]:
        checks = []
        for target in TARGETS:
            extra = missing = checked = 0
            first = ""
            disturbed = self.fault_windows(target)
            for s in self.r.samples:
                if not s.generation or not s.pods:
                    continue
                since = min((a for a, b in disturbed if a <= s.at <= b), default=None)
                got, allowed, needed = self._sets(target, s, since)
                over, short = got - allowed, needed - got
                extra, missing, checked = extra + len(over), missing + len(short), checked + 1
                if (over or short) and not first:
                    first = f"; first at {_hm(s.at)}: {sorted(over)[:2]} {sorted(short)[:2]}"
            checks.append(
                Check(
                    f"series: {target}",
                    f"{checked} samples: {extra} beyond the stale bound, {missing} missing{first}",
                    "0 and 0 (in a fault window, the jobs listed before it count as live; "
                    "missing: outside fault windows)",
                    extra == 0 and missing == 0 and checked > 0,
                )
            )
        return checks

    def _sets(self, target: str, s: Sample, since: float | None) -> tuple[Pairs, Pairs, Pairs]:
        """(exported, allowed, required) of `target` in sample `s`: AIHC jobs as (job, "") and
        pods, Alaya pods. Allowed: what the world held within the lag; in a fault window
        (`since` its start), also anything it held since just before the window began, for a
        failed listing leaves the last good one's jobs in place. Required, outside a fault
        window: what it held throughout the lag."""
        disturbed = since is not None
        at = self.t0 + s.at
        allow = LAG + (s.at - since if since is not None else 0.0)
        window = [at - allow + i * 15 for i in range(int(allow // 15) + 1)] + [at]
        if target == AIHC:
            got = {(j, "") for j in s.aihc_jobs} | s.pods[AIHC]
            allowed = set().union(*(_pairs(self.expected.aihc_jobs(t), jobs=True) for t in window))
            if disturbed:
                return got, allowed, set()
            listed = self.expected.aihc_jobs(at - LAG).keys() & self.expected.aihc_jobs(at).keys()
            before, now = self.expected.aihc_running(at - LAG), self.expected.aihc_running(at)
            steady = {j: p for j, p in now.items() if before.get(j) == p}
            return got, allowed, {(j, "") for j in listed} | _pairs(steady, jobs=False)
        aidc = LIST_AIDC if target == LIST else FILE_AIDC
        ours = {j.id for t in window for j, _ in self.expected.alaya.window(t) if j.aidc_id == aidc}
        got = {(j, p) for j, p in s.pods["alaya"] if j in ours}

        def source(t: float) -> Pods:
            if target == LIST:
                return self.expected.alaya_running(t, aidc)
            return self.expected.file_jobs(t)

        allowed = set().union(*(_pairs(source(t), jobs=False) for t in window))
        if disturbed:
            return got, allowed, set()
        before, now = source(at - LAG), source(at)
        return (
            got,
            allowed,
            _pairs({j: p for j, p in now.items() if before.get(j) == p}, jobs=False),
        )

    # -- up --------------------------------------------------------------------------------

    def up(self) -> list[Check]:
        scrapes = [x for x in self.r.scrapes if x.ok]
        checks = []
        goal_down, goal_back = ROUND + TIMEOUT + SCRAPE + CHECKPOINT, RECOVERY
        for e in (e for e in self.episodes if e.kind in OUTAGES):
            start, end = self.effective_start(e), self.effective_end(e)
            for target in e.targets:
                down = next(
                    (x.at for x in scrapes if x.at >= start and x.up.get(target) == 0), None
                )
                back = next((x.at for x in scrapes if x.at >= end and x.up.get(target) == 1), None)
                down_lag = math.inf if down is None else down - start
                back_lag = math.inf if back is None else back - end
                checks.append(
                    Check(
                        f"up: {e.kind} / {target}",
                        f"0 after {down_lag:.0f} s, 1 again {back_lag:.0f} s after its end"
                        " (knobs sent {:.1f} s, cleared {:.1f} s late)".format(*self.late(e)),
                        f"<= {goal_down:.0f} s (a round, a timeout, a scrape), "
                        f"<= {goal_back:.0f} s (two rounds, a timeout, a scrape)",
                        down_lag <= goal_down and back_lag <= goal_back,
                    )
                )
        wrong: Counter[str] = Counter()
        first = ""
        for target in TARGETS:
            windows = self.fault_windows(target)
            for x in scrapes:
                if x.up.get(target, 1.0) == 0 and not _inside(x.at, windows):
                    wrong[target] += 1
                    first = first or f"; first {target} at {_hm(x.at)}"
        checks.append(
            Check("up: 0 outside a fault", f"{sum(wrong.values())} scrapes{first}", "0", not wrong)
        )
        return checks

    # -- budget and connections -------------------------------------------------------------

    def budget(self) -> list[Check]:
        checks = []
        limit = 60 * RATE
        for target in TARGETS:
            per_minute = Counter(int(t // 60) for t in self.requests(target))
            over = {m: n for m, n in per_minute.items() if n > limit + 1}
            busiest = max(per_minute.values(), default=0)
            checks.append(
                Check(
                    f"budget: {target}",
                    f"busiest minute {busiest} requests; {len(over)} minutes over",
                    f"<= {limit:.0f} a minute (one burst aside)",
                    len(over) <= 1,
                )
            )
        for e in (e for e in self.episodes if e.kind == "429 Retry-After"):
            checks.append(self._pause(e))
        return checks

    def _pause(self, e: Episode) -> Check:
        """From the exporter's line saying it paused (the first 429 read; calls admitted
        before then were on their way), to the end of the pause."""
        asked = [
            t
            for t, line in self._log_times()
            if t is not None
            and t >= e.start
            and str(line.get("event", "")).startswith("provider asked")
        ]
        if not asked:
            return Check("Retry-After pause: AIHC", "the exporter never paused", "", False)
        pause = float(str(e.faults["retry_after"]))
        a, b = asked[0] + 1, asked[0] + pause - 5
        calls = sum(1 for t in self.requests(AIHC) if a <= t <= b)
        opened = sum(1 for t in self.accepted(AIHC) if a <= t <= b)
        return Check(
            "Retry-After pause: AIHC",
            f"{calls} requests, {opened} new connections in the {b - a:.0f} s after the 429",
            "0 and 0",
            calls == 0 and opened == 0,
        )

    def connections(self) -> list[Check]:
        checks = []
        quiet = [(a - 120, b + 120) for a, b in self.fault_windows()]
        for target in TARGETS:
            per_minute = Counter(int(t // 60) for t in self.accepted(target))
            steady = [
                n
                for m, n in per_minute.items()
                if not (_inside(m * 60, quiet) or _inside(m * 60 + 59, quiet))
            ]
            busiest = max(steady, default=0)
            checks.append(
                Check(
                    f"connections: {target}",
                    f"{sum(per_minute.values())} in all; busiest steady minute {busiest}",
                    f"<= {CONCURRENCY} a minute (the pool) in steady state",
                    busiest <= CONCURRENCY,
                )
            )
        return checks

    # -- secrets ---------------------------------------------------------------------------

    def secrets(self) -> Check:
        forms = {f for secret in SECRETS for f in spellings(secret)}
        scrapes = sum(len(s.secrets) for s in self.r.samples)
        pages = sum(len(v.secrets) for v in self.r.visits)
        text = "\n".join(json.dumps(line, ensure_ascii=False) for line in self.r.logs)
        logged = sorted(f for f in forms if f in text)
        return Check(
            "secrets: echoed keys",
            f"{scrapes} in {len(self.r.samples)} scrapes, {pages} in {len(self.r.visits)} "
            f"visits of every page, {len(logged)} in {len(self.r.logs)} log lines {logged[:3]}",
            "none anywhere",
            scrapes == pages == len(logged) == 0,
        )

    # -- logs ------------------------------------------------------------------------------

    def _log_times(self) -> list[tuple[float | None, dict[str, object]]]:
        return [(self._log_time(line), line) for line in self.r.logs]

    def logs(self) -> list[Check]:
        times = self._log_times()
        counted = []
        for e in self.episodes:
            end = self.effective_end(e) + RECOVERY
            lines = sum(1 for t, _ in times if t is not None and e.start <= t <= end)
            requests = sum(
                1 for target in e.targets for t in self.requests(target) if e.start <= t <= end
            )
            counted.append((lines, e.kind, requests))
        worst = max(counted)
        outside = sum(1 for t, _ in times if t is not None and not _inside(t, self.fault_windows()))
        hours = self.r.run / 3600
        traces = sum(1 for _, line in times if "exception" in line or "Traceback" in str(line))
        size = sum(len(json.dumps(line)) + 1 for line in self.r.logs)
        day = 86400 / self.r.run
        return [
            Check(
                "logs: lines per fault episode",
                f"at most {worst[0]} ({worst[1]}, against {worst[2]} requests)",
                f"<= {EPISODE_LINES}, none per request",
                worst[0] <= EPISODE_LINES,
            ),
            Check(
                "logs: lines outside faults",
                f"{outside / hours:.1f} an hour",
                f"<= {QUIET_LINES_PER_HOUR} an hour",
                outside / hours <= QUIET_LINES_PER_HOUR,
            ),
            Check("logs: tracebacks", str(traces), "0", traces == 0),
            Check(
                "logs: volume",
                f"{len(self.r.logs) * day:.0f} lines, {size * day / 1024:.0f} KiB a simulated day",
                "reported",
                True,
            ),
        ]

    def _log_time(self, line: dict[str, object]) -> float | None:
        stamp = line.get("timestamp")
        if not isinstance(stamp, str):
            return None
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - self.t0

    # -- steadiness ------------------------------------------------------------------------

    def steadiness(self) -> list[Check]:
        """The first hour after the warm-up against the last, fault windows left out, and each
        against a peer measured in the same moments: a scrape's p99 against `/-/healthy`'s,
        the exporter's CPU against the simulator's (which serves the same calls)."""
        warm = self.r.listened + WARM_UP
        windows = ((warm, warm + 3600), (self.r.run - 3600, self.r.run))
        faults = self.fault_windows()
        scrapes = [
            [x for x in self.r.scrapes if x.ok and a <= x.at < b and not _inside(x.at, faults)]
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
            if _inside(one.at, faults) or _inside(two.at, faults):
                continue
            if None in (one.exporter_cpu, two.exporter_cpu, one.sim_cpu, two.sim_cpu):
                continue
            spent += (two.exporter_cpu or 0.0) - (one.exporter_cpu or 0.0)
            sim += (two.sim_cpu or 0.0) - (one.sim_cpu or 0.0)
            span += two.at - one.at
        hours = span / 3600 if span else math.inf
        return spent / hours, sim / hours

    # -- status pages ----------------------------------------------------------------------

    def status_pages(self) -> list[Check]:
        checks = []
        for visit in self.r.visits:
            e = visit.episode
            shown, ok = [], True
            for target in TARGETS:
                doc = visit.targets.get(target)
                if doc is None:
                    shown.append(f"{target}: no page")
                    ok = False
                    continue
                line, fine = self._shows(e, target, doc)
                shown.append(line)
                ok = ok and fine
            if e.failing and e.kind not in OUTAGES:
                ok = ok and any("(met it)" in line for line in shown)
            checks.append(
                Check(f"status page: {e.kind}", "; ".join(shown), "state, error, since", ok)
            )
        return checks

    def _shows(self, e: Episode, target: str, doc: dict[str, object]) -> tuple[str, bool]:
        """What the page shows of `target` during `e`, and whether that is right: a target the
        fault reaches shows an error from it (an outage: down or paused since its start), any
        other shows up."""
        state = str(doc["state"])
        since = float(str(doc["since"])) - self.t0 if doc["since"] else None
        error = doc["last_error"] if isinstance(doc["last_error"], dict) else None
        line = f"{target.removeprefix('soak-')} {state}"
        line += f" since {_hm(since)}" if since is not None else ""
        if error is not None:
            line += f", error {error['code']} at {_hm(float(error['at']) - self.t0)}"
        if target not in e.targets or not e.failing:
            return line, state == "up"

        recent = error is not None and float(error["at"]) - self.t0 >= e.start - ROUND
        if e.kind not in OUTAGES:
            # A share of the calls fails: whichever target met one shows it (`status_pages`).
            return line + (" (met it)" if recent else ""), True
        began = since is not None and since >= e.start - ROUND
        return line, recent and began and state in ("down", "paused")

    # -- lifecycle -------------------------------------------------------------------------

    def lifecycle(self) -> list[Check]:
        exits = ", ".join(f"{code} in {took:.1f} s" for code, took in self.r.exits)
        refused = max((s.refused for s in self.r.samples), default=0.0)
        reloads = [s.reload_ok for s in self.r.samples if s.reload_ok is not None]
        bad = any(v == 0 for v in reloads)
        last = reloads[-1] if reloads else None
        return [
            Check(
                "SIGTERM: exit codes",
                exits,
                "0, within the 3 s grace",
                bool(self.r.exits) and all(c == 0 and t <= 3.5 for c, t in self.r.exits),
            ),
            Check(
                "rotation: calls refused",
                f"{refused:.0f} answered 401/403; the old keys, tried after: {self.r.old_keys}",
                "0: the old keys never sent after the reload; and they are refused (403)",
                refused == 0 and set(self.r.old_keys.values()) == {403},
            ),
            Check(
                "reload: a bad file, then a good one",
                f"reload_successful {'0 after the bad file' if bad else 'never 0'}, "
                f"{last} at the end",
                "0, then 1",
                bad and last == 1,
            ),
        ]
