"""Alaya NeW Cloud provider: configured jobs x pods, one gpu-metrics call per pod and type.

A poll asks, for every pod of every job this replica owns, `gpu-metrics` once per configured
`type` and (with `pod_details`) the pod's `basic`. Each call is its own part of the job
(`{pod}:{type}`, `{pod}:basic`), so a failed call keeps that part's last good series (see
`exporter.model.merge`) while every other pod's and type's series are fresh. The pod's newest
sample time, over every type, is the part `{pod}:last_sample`; the window length is a
target-wide sample under job id "". Which jobs and pods is the job source's (`discovery`); a
job from Alaya's job list also has the part `job` (info, status, times, replicas).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from exporter.api import ApiError
from exporter.config import AlayaTarget
from exporter.logs import get_logger
from exporter.metrics import KNOWN_POD_PHASES
from exporter.model import FAILED, Failed, PartOutcome, PollResult
from exporter.providers.alaya.client import AlayaClient, InvalidReply, Window, window_for
from exporter.providers.alaya.discovery import JobSource, job_source
from exporter.providers.alaya.mapping import (
    PodKey,
    basic_samples,
    job_samples,
    last_sample,
    metric_samples,
    query_window,
)
from exporter.providers.base import PollContext
from exporter.providers.kit.states import Seen
from exporter.selfmetrics import SelfMetrics

log = get_logger(__name__)

PROVIDER = "alaya"
TARGET_WIDE = ""


@dataclass(frozen=True, slots=True)
class _CallOutcome:
    part: str
    outcome: PartOutcome
    newest_timestamp: float | None = None

    @property
    def failed(self) -> bool:
        return isinstance(self.outcome, Failed)


class AlayaProvider:
    provider = PROVIDER

    def __init__(
        self, target: AlayaTarget, metrics: SelfMetrics, jobs: JobSource | None = None
    ) -> None:
        self.config = target
        self.target = target.name
        self._metrics = metrics
        self._client = AlayaClient(target, metrics)
        self._jobs: JobSource = jobs or job_source(target, self._client, metrics)
        self._zone = ZoneInfo(target.time_zone)
        # Newest sample time seen per pod, across polls: what staleness alerts compare with.
        self._newest: dict[PodKey, float] = {}
        self._renames_logged: set[PodKey] = set()
        # Pod phases seen so far: each gets a series in every pod's state set.
        self._phases = Seen(KNOWN_POD_PHASES)

    async def poll(self, context: PollContext) -> PollResult:
        result = PollResult()
        window = window_for(self.config, context.started_at)
        result.put(TARGET_WIDE, "window", (query_window(self.target, window.seconds),))
        try:
            jobs = await self._jobs.jobs(context)
        except (ApiError, InvalidReply):
            # The source has logged and counted it.
            result.listed = False
            result.failed_requests += 1
            return result
        keys = [
            PodKey(job.job_id, pod)
            for job in jobs
            if context.owns_job(job.job_id)
            for pod in job.pods
        ]
        for job in jobs:
            if job.record is not None and context.owns_job(job.job_id):
                result.put(job.job_id, "job", job_samples(job.record, self._zone, self._drop))
        await asyncio.gather(*(self._poll_pod(key, window, context, result) for key in keys))
        # Pods no longer polled take what is remembered about them along.
        polled = set(keys)
        self._newest = {k: v for k, v in self._newest.items() if k in polled}
        self._renames_logged &= polled
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

    async def _poll_pod(
        self, key: PodKey, window: Window, context: PollContext, result: PollResult
    ) -> None:
        calls = [self._metric_call(key, t, window, context) for t in self.config.types]
        if self.config.pod_details:
            calls.append(self._basic_call(key, context))
        outcomes = await asyncio.gather(*calls)
        for call in outcomes:
            result.put(key.job_id, call.part, call.outcome)
            if call.failed:
                result.failed_requests += 1
            if call.newest_timestamp is not None:
                self._newest[key] = max(self._newest.get(key, 0.0), call.newest_timestamp)
        if key in self._newest:
            result.put(key.job_id, f"{key.pod}:last_sample", (last_sample(key, self._newest[key]),))

    async def _metric_call(
        self, key: PodKey, metric_type: str, window: Window, context: PollContext
    ) -> _CallOutcome:
        part = f"{key.pod}:{metric_type}"
        try:
            data = await self._client.gpu_metrics(
                key.job_id, key.pod, metric_type, window, context.deadline
            )
        except (ApiError, InvalidReply) as exc:
            self._log_failure(key, part, exc)
            return _CallOutcome(part, FAILED)
        mapped = metric_samples(key, metric_type, data, self._drop)
        if mapped.other_pod_names and key not in self._renames_logged:
            self._renames_logged.add(key)
            log.debug(
                "alaya reply names another pod than the path; series keep the path's",
                target=self.target,
                job_id=key.job_id,
                pod=key.pod,
                reply_pod_names=sorted(mapped.other_pod_names),
            )
        return _CallOutcome(part, mapped.samples, mapped.newest_timestamp)

    async def _basic_call(self, key: PodKey, context: PollContext) -> _CallOutcome:
        part = f"{key.pod}:basic"
        try:
            basic = await self._client.pod_basic(key.job_id, key.pod, context.deadline)
        except (ApiError, InvalidReply) as exc:
            self._log_failure(key, part, exc)
            return _CallOutcome(part, FAILED)
        self._phases.add(basic.status or "")
        return _CallOutcome(part, basic_samples(key, basic, self._drop, self._phases.values))

    def _log_failure(self, key: PodKey, part: str, exc: Exception) -> None:
        # ApiClient has logged the request itself; this says which series go stale.
        if isinstance(exc, InvalidReply):
            log.warning(
                "alaya reply has an unexpected shape",
                target=self.target,
                job_id=key.job_id,
                part=part,
                error=str(exc),
            )

    def _drop(self, reason: str) -> None:
        self._metrics.drop(PROVIDER, reason)
