"""Alaya NeW Cloud provider: the jobs of its job source, read pod by pod.

`list_jobs()` asks the target's `JobSource` (`discovery`: the configured list and jobs file,
or Alaya's job list) which jobs and pods to read, and keeps at most `max_jobs` jobs, those
exported already first. A job from Alaya's job list has the part `job` (info, status, times,
replicas). Every owned pod is a unit;
its items are one `gpu-metrics` call per configured `type` and (with `pod_details`) the pod's
`basic`. Each call is its own part of the job (`{pod}:{type}`, `{pod}:basic`), so a failed
call keeps that part's last good series (see `exporter.model.merge`) while every other pod's
and type's series are fresh. The pod's newest sample time, over every type, is the part
`{pod}:last_sample`; the window length is a target-wide sample under job id "".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from exporter.logs import get_logger
from exporter.metrics import KNOWN_JOB_STATUSES, KNOWN_POD_PHASES
from exporter.model import FAILED
from exporter.providers.alaya.client import AlayaClient, InvalidReply, window_for
from exporter.providers.alaya.discovery import JobSource, JobTarget, StaticJobs
from exporter.providers.alaya.jobsfile import JobsFile
from exporter.providers.alaya.listing import ListDiscovery
from exporter.providers.alaya.mapping import (
    PodKey,
    basic_samples,
    job_samples,
    job_status,
    last_sample,
    metric_samples,
    query_window,
)
from exporter.providers.alaya.target import BASIC, NAME, AlayaTarget
from exporter.providers.base import Listing, PollContext, ReadContext, ReadResult, Unit
from exporter.providers.kit.folds import FoldLog
from exporter.providers.kit.states import Seen
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError

if TYPE_CHECKING:
    from exporter.providers.base import TierPlan

log = get_logger(__name__)

TARGET_WIDE = ""
WINDOW_PART = "window"
JOB_PART = "job"
# Jobs placed between two turns of the event loop in a round's listing.
PLACE_BATCH = 25


class AlayaProvider:
    provider = NAME

    def __init__(
        self,
        target: AlayaTarget,
        metrics: SelfMetrics,
        tiers: TierPlan,
        jobs: JobSource | None = None,
    ) -> None:
        self.config = target
        self.target = target.name
        self._metrics = metrics
        self._client = AlayaClient(target, metrics)
        self.gate = self._client.gate
        self.call_log = self._client.call_log
        self._jobs: JobSource = jobs or job_source(target, self._client, metrics)
        self._zone = ZoneInfo(target.time_zone)
        self._items = target.read_items()
        self.tiers = tiers
        # Newest sample time seen per pod, across reads: what staleness alerts compare with.
        self._newest: dict[PodKey, float] = {}
        self._renames_logged: set[PodKey] = set()
        self._exported: set[str] = set()
        # Job statuses and pod phases seen so far: each gets a series in every job's (pod's)
        # state set; past their caps, `other`, logged at most once a minute for the target.
        folds = FoldLog(NAME, target.name)
        self._statuses = Seen(KNOWN_JOB_STATUSES, label="status", folds=folds)
        self._phases = Seen(KNOWN_POD_PHASES, label="phase", folds=folds)

    async def list_jobs(self, context: PollContext) -> Listing:
        out = Listing()
        window = window_for(self.config, context.started_at)
        out.parts[TARGET_WIDE] = frozenset({WINDOW_PART})
        out.readings[TARGET_WIDE] = {WINDOW_PART: (query_window(self.target, window.seconds),)}
        try:
            jobs = await self._jobs.jobs(context)
        except (ApiError, InvalidReply):
            # The source has logged and counted it.
            out.listed = False
            out.failed_requests += 1
            return out
        selected, out.left_out = self._select([j for j in jobs if context.owns_job(j.job_id)])
        pods: set[PodKey] = set()
        for count, job in enumerate(selected, 1):
            self._place(job, out, pods)
            if count % PLACE_BATCH == 0:
                # Thousands of pods placed at once hold the loop longer than a scrape should wait.
                await asyncio.sleep(0)
        self._exported = {job.job_id for job in selected}
        # Pods no longer read take what is remembered about them along.
        self._newest = {k: v for k, v in self._newest.items() if k in pods}
        self._renames_logged &= pods
        return out

    def _place(self, job: JobTarget, out: Listing, pods: set[PodKey]) -> None:
        """A listed job's parts, readings and a unit per pod, into `out`."""
        parts: set[str] = set()
        if job.record is not None:
            parts.add(JOB_PART)
            self._statuses.add(job_status(job.record.status))
            statuses = self._statuses.values
            samples = job_samples(job.record, self._zone, self._drop, statuses)
            out.readings[job.job_id] = {JOB_PART: samples}
        for pod in job.pods:
            key = PodKey(job.job_id, pod)
            pods.add(key)
            out.units.append(Unit(key, job.job_id, self._items))
            parts.update(f"{pod}:{item}" for item in self._items)
            parts.add(f"{pod}:last_sample")
        out.parts[job.job_id] = frozenset(parts)

    def _select(self, jobs: Sequence[JobTarget]) -> tuple[list[JobTarget], int]:
        """At most max_jobs jobs, those already exported first."""
        cap = self.config.max_jobs
        if len(jobs) <= cap:
            return list(jobs), 0
        ordered = sorted(jobs, key=lambda j: j.job_id not in self._exported)
        return ordered[:cap], len(jobs) - cap

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        key = unit.key
        assert isinstance(key, PodKey)
        result = ReadResult(key.job_id)
        part = f"{key.pod}:{item}"
        try:
            if item == BASIC:
                basic = await self._client.pod_basic(key.job_id, key.pod, context.deadline)
                self._phases.add(basic.status or "")
                phases = self._phases.values
                result.outcomes[part] = basic_samples(key, basic, self._drop, phases)
                return result
            window = window_for(self.config, context.now)
            data = await self._client.gpu_metrics(
                key.job_id, key.pod, item, window, context.deadline
            )
        except ApiError:
            # LimitedClient has logged it (a reply of the wrong shape included, as code `error`).
            result.failed = True
            result.outcomes[part] = FAILED
            return result
        mapped = metric_samples(key, item, data, self._drop)
        if mapped.other_pod_names and key not in self._renames_logged:
            self._renames_logged.add(key)
            log.debug(
                "alaya reply names another pod than the path; series keep the path's",
                target=self.target,
                job_id=key.job_id,
                pod=key.pod,
                reply_pod_names=sorted(mapped.other_pod_names),
            )
        result.outcomes[part] = mapped.samples
        if mapped.newest_timestamp is not None:
            self._newest[key] = max(self._newest.get(key, 0.0), mapped.newest_timestamp)
        if key in self._newest:
            result.outcomes[f"{key.pod}:last_sample"] = (last_sample(key, self._newest[key]),)
        return result

    async def close(self) -> None:
        await self._jobs.close()
        await self._client.close()

    def describe(self) -> dict[str, str]:
        window = window_for(self.config, 0.0)
        return {
            "endpoint": self.config.endpoint,
            **self._jobs.describe(),
            "types": ", ".join(self.config.types),
            "window": window.describe(),
        }

    def _drop(self, reason: str) -> None:
        self._metrics.drop(NAME, reason)


def job_source(target: AlayaTarget, client: AlayaClient, metrics: SelfMetrics) -> JobSource:
    """The source `target` asks for, built from its configuration alone. Here, above both
    sources, because list discovery names its pods through the configured ones."""
    file = JobsFile(target.jobs_file, target.name, metrics) if target.jobs_file else None
    named = StaticJobs(target.jobs, file)
    if target.discovery == "list":
        return ListDiscovery(target, client, metrics, named)
    return named
