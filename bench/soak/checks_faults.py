"""The soak's checks of how the exporter meets each episode: `up` through the outages, the
request budget and the connections (a Retry-After pause included), what the status pages
show during each episode, and its lifecycle (SIGTERM, the key rotation, a bad reload).
"""

from __future__ import annotations

import math
from collections import Counter

from bench.soak.evidence import CHECKPOINT, RECOVERY, Check, Evidence, hm, inside
from bench.soak.procs import CONCURRENCY, RATE, ROUND, TIMEOUT
from bench.soak.schedule import AIHC, TARGETS, Episode
from bench.soak.tasks import SCRAPE

OUTAGES = ("5xx burst", "hang past timeout", "429 Retry-After", "listing outage")


class FaultChecks(Evidence):
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
                if x.up.get(target, 1.0) == 0 and not inside(x.at, windows):
                    wrong[target] += 1
                    first = first or f"; first {target} at {hm(x.at)}"
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
            for t, line in self.log_times()
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
                if not (inside(m * 60, quiet) or inside(m * 60 + 59, quiet))
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
        line += f" since {hm(since)}" if since is not None else ""
        if error is not None:
            line += f", error {error['code']} at {hm(float(error['at']) - self.t0)}"
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
