"""AIHC's history for `backfill`: DescribeJobs for the window's jobs, then per job one
DescribeJob (its pods, for `training_pod_info`) and, per metric type, DescribeJobMetrics over
windows that hold at most `MAX_POINTS` steps and whose replies fit in `max_reply_bytes`.

Everything goes through the provider's own client and mapping: the signed calls, the live
path's budget, retries and reply bounds, and the live names, labels and ratio conversions. A
reply over the bound (`too_large`) is read again as two halves, down to one step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from exporter.metrics import KNOWN_JOB_STATUSES, KNOWN_POD_PHASES
from exporter.providers.aihc import mapping
from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.listing import JobLister
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.models import Job, PodSeries
from exporter.providers.aihc.target import AihcTarget
from exporter.providers.base import PollContext
from exporter.providers.kit.history import (
    Described,
    Facts,
    HistoryUnavailable,
    JobRef,
    Series,
    Task,
    call_deadline,
)
from exporter.providers.kit.numbers import timestamp
from exporter.providers.kit.windows import over, windows
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError
from exporter.transport.reply import TOO_LARGE

if TYPE_CHECKING:
    from exporter.providers.base import TierPlan

# Steps per DescribeJobMetrics call: the most `first_window_steps` allows, and the most points
# the simulator serves per pod (real pools' limit is not documented). At 60 s steps a day of
# one type takes 1.44 calls.
MAX_POINTS: Final = 1000
# Bytes a point takes in a reply (`{"time":1758628017,"value":"0.0057232057641865"},` is 52),
# and the share of `max_reply_bytes` a window may plan for: 8 MiB holds 1000 points of 65 pods.
POINT_BYTES: Final = 64
REPLY_SHARE: Final = 0.5
NOT_FOUND: Final = "404"
INFO_NAMES: Final = frozenset({"training_job_info"})
STATUS_NAMES: Final = frozenset({"training_job_status"})
POD_INFO_NAMES: Final = frozenset({"training_pod_info"})


class ListingFailed(Exception):
    """DescribeJobs could not be read whole: the window's jobs are not known."""


class AihcHistory:
    provider = "aihc"

    def __init__(self, target: AihcTarget, metrics: SelfMetrics, tiers: TierPlan) -> None:
        self.config = target
        self.target = target.name
        self._metrics = metrics
        self._client = AihcClient(target, metrics)
        self._lister = JobLister(self._client, target, metrics)
        self.gate = self._client.api.gate
        self._step = max(1, int(target.time_step))

    def retention(self) -> tuple[float, str] | None:
        # "Metrics stay queryable after a job ends" (docs/providers.md); no limit is documented.
        return None

    def _drop(self, reason: str) -> None:
        self._metrics.drop(self.provider, reason)

    async def jobs(self, since: float, until: float) -> Sequence[JobRef]:
        listing = await self._lister.list(PollContext(call_deadline(), time.time()))
        if not listing.complete:
            raise ListingFailed("DescribeJobs was not read whole (see the log)")
        found = []
        for job_id, entry in listing.jobs.items():
            created = mapping.parse_rfc3339(entry.job.created_at) if entry.job.created_at else None
            finished = (
                mapping.parse_rfc3339(entry.job.finished_at) if entry.job.finished_at else None
            )
            if created is not None and created > until:
                continue
            if finished is not None and finished < since:
                continue
            data = {"queue": entry.queue, "job": entry.job.model_dump(mode="json")}
            found.append(JobRef(job_id, data))
        return found

    def _job(self, ref: JobRef) -> tuple[Job, JobIdentity]:
        job = Job.model_validate(ref.data["job"])
        return job, JobIdentity(self.config.resource_pool_id, str(ref.data["queue"]), ref.job_id)

    def _life(self, job: Job, since: float, until: float) -> tuple[float, float, float | None]:
        created = mapping.parse_rfc3339(job.created_at) if job.created_at else None
        finished = mapping.parse_rfc3339(job.finished_at) if job.finished_at else None
        return max(since, created or since), until, finished

    async def describe(self, ref: JobRef, since: float, until: float) -> Described:
        job, who = self._job(ref)
        start, end, finished = self._life(job, since, until)
        try:
            detail = await self._client.describe_job(ref.job_id, who.queue, call_deadline())
            pods = mapping.unique_pods(detail.pods or [])
        except ApiError as exc:
            if exc.code != NOT_FOUND:
                raise
            pods = []
        series: list[Series] = []
        status_from = max(start, finished) if finished is not None else start
        for sample in mapping.job_samples(job, who, KNOWN_JOB_STATUSES, self._drop):
            if sample.name in INFO_NAMES:
                series.append(over(sample, start, end))
            elif sample.name in STATUS_NAMES:
                series.append(over(sample, status_from, end))
        for sample in mapping.pod_samples(pods, who, KNOWN_POD_PHASES, self._drop):
            if sample.name in POD_INFO_NAMES:
                series.append(over(sample, start, end))
        # Points come while the job runs: a step past its end is read, no more.
        metrics_end = min(end, finished + self._step) if finished is not None else end
        return Described(series, {"pods": len(pods), "start": start, "end": metrics_end})

    def window_seconds(self, pods: int) -> int:
        fits = int(self.config.limits.max_reply_bytes * REPLY_SHARE) // (max(1, pods) * POINT_BYTES)
        return max(1, min(MAX_POINTS, fits)) * self._step

    def tasks(self, ref: JobRef, facts: Facts, since: float, until: float) -> list[Task]:
        length = self.window_seconds(int(facts.get("pods", 1)))
        spans = windows(float(facts["start"]), float(facts["end"]), length)
        return [
            Task(f"{metric_type}@{start}", metric_type, start, end)
            for metric_type in self.config.effective_metric_types
            for start, end in spans
        ]

    async def read(self, ref: JobRef, facts: Facts, task: Task) -> list[Series]:
        who = JobIdentity(self.config.resource_pool_id, str(ref.data["queue"]), ref.job_id)
        by_pod: dict[str, Series] = {}
        await self._read_span(who, task.item, task.start, task.end, by_pod)
        return list(by_pod.values())

    async def _read_span(
        self, who: JobIdentity, metric_type: str, start: int, end: int, out: dict[str, Series]
    ) -> None:
        try:
            reply = await self._client.describe_job_metrics(
                who.job_id, who.queue, metric_type, start, end, self._step, call_deadline()
            )
        except ApiError as exc:
            if exc.code == TOO_LARGE and end - start >= 2 * self._step:
                middle = start + (end - start) // 2
                await self._read_span(who, metric_type, start, middle, out)
                await self._read_span(who, metric_type, middle + 1, end, out)
                return
            if exc.code == NOT_FOUND:
                raise HistoryUnavailable(str(exc)) from None
            raise
        for pod_series in reply.metrics or []:
            self._absorb(who, metric_type, pod_series, start, end, out)

    def _absorb(
        self,
        who: JobIdentity,
        metric_type: str,
        pod_series: PodSeries,
        start: int,
        end: int,
        out: dict[str, Series],
    ) -> None:
        pod = pod_series.pod_name
        series = out.get(pod)
        if series is None:
            (sample,) = mapping.pod_type_samples(metric_type, [(mapping.pod_values(who, pod), 0.0)])
            series = out[pod] = Series(sample.name, sample.label_names, sample.label_values)
        read = mapping.resource_reader(metric_type, self.config.usage_unit, self._drop)
        for point in pod_series.metrics or []:
            at = timestamp(point.time, self._drop)
            if at is None or not start <= at <= end:
                continue
            value = read(point.value)
            if value is not None:
                series.points.append((at, value))

    async def close(self) -> None:
        await self._client.close()
