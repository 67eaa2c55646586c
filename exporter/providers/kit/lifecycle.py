"""A job's life as the job list and its reads show it: when it first ran, how long it waited
in its queue, how long it spent restarting, and, once it failed, why.

Providers name their statuses; this module knows only their kinds (`WAITING` before a job
first runs, `RUNNING`, `RESTARTING`, `FAILED`, `ENDED` for the other ends, `OTHER`). Per job,
`Lifecycles` keeps:

- the first Running: exactly, from the provider's status timeline where a read gives one;
  else the earliest of (the end or the list's time) minus the provider's running time, and the
  time of the first list that showed the job running after one that showed it waiting;
- the queue wait: created to first Running, or to the list's time while the job waits; none
  for a job that started at a time no source gives, or never ran;
- the seconds spent restarting or waiting again after the first Running, from the timeline
  (`timeline` returns them to the read that brought it);
- for a job that failed, the evidence its reads leave (events, pods' reasons) until every
  read it is due has been made, successful or not, then the `Verdict` of the classifier.
  Reasons no rule matched are logged once, the first time they are seen.

Every figure comes from the provider's data, so an exporter that restarts, or another shard,
computes the same one (the list-time observation aside, which only fills a gap).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from exporter.logs import get_logger
from exporter.providers.kit.failures import Classifier, Evidence, Verdict
from exporter.status import redact

log = get_logger(__name__)

WAITING: Final = "waiting"
RUNNING: Final = "running"
RESTARTING: Final = "restarting"
FAILED: Final = "failed"
ENDED: Final = "ended"
OTHER: Final = "other"
# Evidence kept per failed job until its verdict (distinct reason and message pairs).
MAX_EVIDENCE: Final = 256
# Unmapped reasons remembered as logged: past it, the set starts again.
MAX_UNMAPPED: Final = 1024


@dataclass(frozen=True, slots=True)
class Timing:
    started: float | None
    queue_wait: float | None


@dataclass(slots=True)
class _Life:
    kind: str = OTHER
    seen_waiting: bool = False
    started: float | None = None
    # `started` comes from the provider's timeline.
    exact: bool = False
    # Reads a failed job is due before its verdict, and what they left so far.
    due: set[str] = field(default_factory=set)
    evidence: dict[tuple[str, str], Evidence] = field(default_factory=dict)
    verdict: Verdict | None = None


def from_timeline(
    entries: Iterable[tuple[float, str]], now: float
) -> tuple[float | None, float | None]:
    """(first Running, seconds restarting or waiting after it) of (since, kind) entries."""
    ordered = sorted(entries)
    started = next((at for at, kind in ordered if kind == RUNNING), None)
    if started is None:
        return None, None
    total = 0.0
    ends = [at for at, _ in ordered[1:]] + [now]
    for (at, kind), end in zip(ordered, ends, strict=True):
        if at < started:
            continue
        if kind in (FAILED, ENDED):
            break
        if kind in (RESTARTING, WAITING):
            total += max(0.0, min(end, now) - at)
    return started, total


class Lifecycles:
    def __init__(self, classifier: Classifier, provider: str, target: str) -> None:
        self.classifier = classifier
        self._lives: dict[str, _Life] = {}
        self._logged: set[str] = set()
        self._where = {"provider": provider, "target": target}

    def listed(
        self,
        job_id: str,
        kind: str,
        created: float | None,
        ran: tuple[float | None, float | None],
        now: float,
    ) -> Timing:
        """The job as this round's list shows it; `ran` is (its end, the provider's running
        seconds), either None where the list has none."""
        life = self._lives.setdefault(job_id, _Life())
        if kind == FAILED and life.kind != FAILED:
            life.due, life.evidence, life.verdict = set(), {}, None
        if kind == WAITING and life.started is None:
            life.seen_waiting = True
        if not life.exact:
            self._estimate(life, kind, ran, now)
        life.kind = kind
        wait = None
        if created is not None and life.started is not None:
            wait = max(0.0, life.started - created)
        elif created is not None and kind == WAITING:
            wait = max(0.0, now - created)
        return Timing(life.started, wait)

    @staticmethod
    def _estimate(
        life: _Life, kind: str, ran: tuple[float | None, float | None], now: float
    ) -> None:
        end, seconds = ran
        guesses = [] if life.started is None else [life.started]
        if seconds is not None and seconds > 0:
            guesses.append((now if end is None else end) - seconds)
        if kind == RUNNING and life.seen_waiting and life.started is None:
            guesses.append(now)
        life.started = min(guesses, default=None)

    def timeline(
        self, job_id: str, entries: Iterable[tuple[float, str]], now: float
    ) -> float | None:
        """The provider's status timeline of the job, from a read: its first Running, exact,
        from now on; the seconds it spent restarting since, where it has run."""
        life = self._lives.get(job_id)
        if life is None:
            return None
        started, restarting = from_timeline(entries, now)
        if started is not None:
            life.started, life.exact = started, True
        return restarting

    def expect(self, job_id: str, items: Collection[str]) -> bool:
        """Whether a failed job still waits for evidence; `items` are the reads it is due
        (when none were named yet)."""
        life = self._lives.get(job_id)
        if life is None or life.kind != FAILED or life.verdict is not None:
            return False
        if not life.due:
            life.due = set(items)
        return True

    def evidence(self, job_id: str, found: Iterable[Evidence]) -> None:
        life = self._lives.get(job_id)
        if life is None or life.kind != FAILED or life.verdict is not None:
            return
        for item in found:
            if len(life.evidence) >= MAX_EVIDENCE:
                break
            clean = Evidence(redact(item.reason, 128), redact(item.message, 512), item.warning)
            life.evidence.setdefault((clean.reason, clean.message), clean)

    def read_done(self, job_id: str, item: str) -> None:
        """A read of `item` was made (or failed for good): the verdict once none is due."""
        life = self._lives.get(job_id)
        if life is None or item not in life.due:
            return
        life.due.discard(item)
        if not life.due and life.verdict is None:
            life.verdict = self.classifier.classify(life.evidence.values())
            life.evidence = {}
            self._log_unmapped(job_id, life.verdict)

    def verdict(self, job_id: str) -> Verdict | None:
        life = self._lives.get(job_id)
        return None if life is None or life.kind != FAILED else life.verdict

    def keep(self, job_ids: Collection[str]) -> None:
        """Forget every job not in `job_ids` (a complete list's)."""
        for job_id in [j for j in self._lives if j not in job_ids]:
            del self._lives[job_id]

    def _log_unmapped(self, job_id: str, verdict: Verdict) -> None:
        new = sorted(verdict.unmapped - self._logged)
        if not new:
            return
        if len(self._logged) + len(new) > MAX_UNMAPPED:
            self._logged.clear()
        self._logged.update(new)
        log.warning(
            "failed job classified unknown: reasons no failure rule matches",
            **self._where,
            job_id=job_id,
            reasons=new[:32],
        )


def kinds(statuses: Sequence[tuple[Collection[str], str]], status: str) -> str:
    """The kind of `status` by a provider's table of (statuses, kind); OTHER if none."""
    return next((kind for names, kind in statuses if status in names), OTHER)
