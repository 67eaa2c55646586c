"""What the status pages show, as plain data: the JSON documents of `docs/status-pages.md`.

Each page is its document rendered (`exporter.web.status_pages`), so the HTML and the JSON
never disagree. Everything is read from one immutable `RunnerStatus` a runner gave
(`TargetRunner.status()`: its health, call history, job reads, plan and the store's snapshot
of the target): nothing here renders exposition, calls a provider or reaches into a runner.
Strings that came from a provider (job names, statuses, pod counts, messages) are carried as
they are here and escaped where they are rendered; messages were redacted and cut when they
were recorded.

Times are unix seconds (wall clock); ages are seconds, against when the status was taken.
Sizes are bounded: a jobs document holds at most MAX_LIMIT jobs, a calls document the call
log's rings.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from exporter import __version__
from exporter.model import FINAL_TIER, JobData, TargetSnapshot
from exporter.work.runner_status import CallRecord, JobReads, RunnerStatus

# A tier whose oldest item is older than this many effective intervals has missed a read:
# the page calls the tier, and its target, stale.
LATE_INTERVALS: Final = 2.0
# Jobs a page shows unless asked for another number, and at most.
DEFAULT_LIMIT: Final = 100
MAX_LIMIT: Final = 1000

Doc = dict[str, Any]


def base_path(status: RunnerStatus) -> str:
    """Where a target's pages live: target names are unique across providers."""
    return f"/targets/{status.target}"


def status_document(statuses: Sequence[RunnerStatus], telemetry_path: str) -> Doc:
    """`/status.json`: every target's state, last error, tiers, budget and job count."""
    return {
        "version": __version__,
        "generated_at": time.time(),
        "telemetry_path": telemetry_path,
        "targets": [target_document(s) for s in statuses],
    }


def target_document(status: RunnerStatus) -> Doc:
    health, calls, plan = status.health, status.call_history, status.plan
    tiers = tier_ages(status)
    last = calls.last_error
    return {
        "provider": status.provider,
        "target": status.target,
        "details": dict(status.details),
        "state": health.state,
        "since": health.since or None,
        "paused_until": health.paused_until,
        "stale": any(t["late"] for t in tiers),
        "last_good_round": health.last_good_round,
        "last_success_at": calls.last_success_at,
        "failed_since_success": calls.failed_since_success,
        "last_error": call_document(last) if last is not None else None,
        "jobs": len(_job_ids(status.snapshot)),
        "budget": {
            "requests_per_second": plan.budget,
            "required": round(plan.required, 3),
            "exceeded": plan.exceeds,
            "finished_last_minute": calls.finished_last_minute,
        },
        "tiers": tiers,
        "links": {
            "jobs": f"{base_path(status)}/jobs",
            "calls": f"{base_path(status)}/calls",
        },
    }


def tier_ages(status: RunnerStatus) -> list[Doc]:
    """Each tier's interval, calls and the age of its oldest item in the snapshot."""
    oldest: dict[str, float] = {}
    for job in status.snapshot.jobs.values():
        for tier, at in _oldest(job).items():
            oldest[tier] = min(at, oldest.get(tier, at))
    now, plan, bounds = status.taken_at, status.plan, status.bounds
    out = []
    for tier, effective in plan.effective.items():
        age = now - oldest[tier] if tier in oldest else None
        out.append(
            {
                "tier": tier,
                "interval": plan.configured[tier],
                "effective_interval": round(effective, 3),
                "calls": plan.requests_per_read.get(tier, 0),
                "oldest_age": None if age is None else round(age, 3),
                "bound": round(bounds[tier], 3),
                "late": age is not None and age > LATE_INTERVALS * effective,
            }
        )
    return out


def call_document(record: CallRecord) -> Doc:
    return record._asdict()


def calls_document(status: RunnerStatus) -> Doc:
    """`/targets/<target>/calls.json`: the recent attempts and failures, newest first; a
    call that failed names its index in `failures`."""
    log = status.call_history
    failures = list(reversed(log.failures))
    index = {id(r): i for i, r in enumerate(failures)}
    calls = []
    for record in reversed(log.recent):
        doc = call_document(record)
        doc["failure"] = index.get(id(record))
        calls.append(doc)
    return {
        "provider": status.provider,
        "target": status.target,
        "generated_at": time.time(),
        "total": log.total,
        "failed_since_success": log.failed_since_success,
        "last_success_at": log.last_success_at,
        "calls": calls,
        "failures": [call_document(r) for r in failures],
    }


def jobs_document(status: RunnerStatus, offset: int = 0, limit: int = DEFAULT_LIMIT) -> Doc:
    """`/targets/<target>/jobs.json`: the jobs whose last read failed first, then the stalest
    (their oldest item's age over its tier's interval; a job whose series all went stale,
    stalest of all), `limit` of them from `offset`, with the counts of all of them. Each names
    the job as its reads last did, and when: through an outage the series go, the names stay."""
    snapshot, reads, intervals = status.snapshot, status.jobs, status.plan.effective
    keyed = sorted(_ranked(snapshot, reads, intervals, status.taken_at))
    offset = max(0, offset)
    limit = max(1, min(limit, MAX_LIMIT))
    errors = {r.job: r for r in status.call_history.failures if r.job is not None}
    rows = [
        _job_row(snapshot.jobs.get(job_id), reads.get(job_id, JobReads()), job_id, status)
        | {"last_error": _error(errors.get(job_id))}
        for _, _, job_id in keyed[offset : offset + limit]
    ]
    return {
        "provider": status.provider,
        "target": status.target,
        "generated_at": time.time(),
        "total": len(keyed),
        "failing": sum(1 for k in keyed if not k[0]),
        "stale": sum(1 for k in keyed if -k[1] > LATE_INTERVALS),
        "offset": offset,
        "limit": limit,
        "jobs": rows,
    }


def _ranked(
    snapshot: TargetSnapshot,
    reads: Mapping[str, JobReads],
    intervals: Mapping[str, float],
    clock: float,
) -> list[tuple[bool, float, str]]:
    """(not failing, -lateness, job id) of every exported or tracked job."""
    empty = JobReads()
    keyed = []
    for job_id in {*_job_ids(snapshot), *(j for j in reads if j)}:
        job = snapshot.jobs.get(job_id)
        oldest = _oldest(job) if job is not None else {}
        late = max(((clock - at) / intervals[t] for t, at in oldest.items()), default=0.0)
        keyed.append(
            (
                not _failing(reads.get(job_id, empty)),
                -(late if job is not None else math.inf),
                job_id,
            )
        )
    return keyed


def _job_ids(snapshot: TargetSnapshot) -> list[str]:
    # The empty id holds parts of the target as a whole, not a job.
    return [j for j in snapshot.jobs if j]


def _oldest(job: JobData) -> dict[str, float]:
    """Tier -> when the job's oldest item of it was read (the runner's monotonic clock)."""
    oldest: dict[str, float] = {}
    for part in job.parts.values():
        if part.tier != FINAL_TIER and part.fetched_at < oldest.get(part.tier, float("inf")):
            oldest[part.tier] = part.fetched_at
    return oldest


def _failing(reads: JobReads) -> bool:
    """The job's last read of some tier failed."""
    return any(at != reads.last_good.get(tier) for tier, at in reads.last_read.items())


def _job_row(job: JobData | None, reads: JobReads, job_id: str, status: RunnerStatus) -> Doc:
    clock, wall, intervals = status.taken_at, time.time(), status.plan.effective
    tiers = {
        tier: {
            "oldest_read_at": wall - (clock - at),
            "last_read_at": reads.last_read.get(tier),
            "late": clock - at > LATE_INTERVALS * intervals[tier],
            "last_read_failed": reads.last_read.get(tier, 0) != reads.last_good.get(tier, 0),
        }
        for tier, at in sorted(_oldest(job).items() if job is not None else ())
    }
    name, job_status, pods = job_facts(job) if job is not None else (None, None, 0)
    known = [at for at in (reads.named_at, reads.pods_at) if at is not None]
    return {
        "job_id": job_id,
        "name": reads.name if reads.named_at is not None else name,
        "status": reads.status if reads.named_at is not None else job_status,
        "pods": reads.pod_count if reads.pod_count is not None else pods,
        "known_at": min(known) if known else None,
        "exported": job is not None,
        "failing": _failing(reads),
        "failures": reads.failures,
        "last_failure_at": reads.last_failure_at,
        "tiers": tiers,
    }


def _error(record: CallRecord | None) -> Doc | None:
    return call_document(record) if record is not None else None


def job_facts(job: JobData) -> tuple[str | None, str | None, int]:
    """A job's name and status as its exported series give them, and its pods' count."""
    name = status = None
    pods: set[str] = set()
    for part in job.parts.values():
        for sample in part.samples:
            names = sample.label_names
            if sample.name == "training_job_info":
                name = _label(names, sample.label_values, "job_name")
            elif sample.name == "training_job_status" and sample.value == 1:
                status = _label(names, sample.label_values, "status")
            elif "pod" in names:
                pods.add(sample.label_values[names.index("pod")])
    pods.discard("")
    return name, status, len(pods)


def _label(names: tuple[str, ...], values: tuple[str, ...], name: str) -> str | None:
    return values[names.index(name)] if name in names else None
