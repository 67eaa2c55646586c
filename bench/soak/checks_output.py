"""The soak's checks of what the exporter puts out: its series against what the worlds held,
its log lines, and no configured secret in any scrape, page or log line.
"""

from __future__ import annotations

import json

from bench.soak.evidence import RECOVERY, Check, Evidence, hm, inside
from bench.soak.expect import FILE_AIDC, LIST_AIDC, Pods
from bench.soak.procs import ROUND, SECRETS
from bench.soak.record import Sample
from bench.soak.schedule import AIHC, LIST, TARGETS
from bench.soak.tasks import SCRAPE
from exporter.redaction import spellings

# When a job the world lists is due on the exporter: its listing's round, its first reads, the
# publish after them and a scrape.
LAG = 2 * ROUND + SCRAPE
EPISODE_LINES = 60
QUIET_LINES_PER_HOUR = 10

Pairs = set[tuple[str, str]]


def _pairs(found: Pods, *, jobs: bool) -> Pairs:
    """(job, pod) of every pod of `found`, and (job, "") of every job too when `jobs`."""
    pairs = {(j, p) for j, pods in found.items() for p in pods}
    return pairs | {(j, "") for j in found} if jobs else pairs


class OutputChecks(Evidence):
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
                    first = f"; first at {hm(s.at)}: {sorted(over)[:2]} {sorted(short)[:2]}"
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

    def logs(self) -> list[Check]:
        times = self.log_times()
        counted = []
        for e in self.episodes:
            end = self.effective_end(e) + RECOVERY
            lines = sum(1 for t, _ in times if t is not None and e.start <= t <= end)
            requests = sum(
                1 for target in e.targets for t in self.requests(target) if e.start <= t <= end
            )
            counted.append((lines, e.kind, requests))
        worst = max(counted)
        outside = sum(1 for t, _ in times if t is not None and not inside(t, self.fault_windows()))
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
