"""The runner's reads of one listed job: its pods (DescribeJob), one DescribeJobMetrics per
metric type, and its events; each fills its own part.

Only DescribeJob's 404 means the job was deleted after the list named it; a 404 on a metric
type or the events fails that part alone, unless one DescribeJob then answers 404 too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection
from typing import Final

from exporter.metrics import KNOWN_POD_PHASES
from exporter.model import FAILED
from exporter.providers.aihc import mapping
from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.events import EventReader
from exporter.providers.aihc.lifecycle import AihcLifecycle
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.series import JobSeries
from exporter.providers.aihc.target import EVENTS, NAME, PODS, AihcTarget
from exporter.providers.base import ReadContext, ReadResult
from exporter.providers.kit.decode import Tolerant
from exporter.providers.kit.folds import FoldLog
from exporter.providers.kit.states import Seen
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError

PODS_PART = "pods"
EVENTS_PART = "events"
LAST_SAMPLE_PART = "last_sample"
METRIC_PART_PREFIX = "metric:"
NOT_FOUND: Final = "404"


def metric_part(metric_type: str) -> str:
    """Interned: the store keys each job's parts by it, one copy for all jobs, not one each."""
    return sys.intern(f"{METRIC_PART_PREFIX}{metric_type}")


def parts_of(item: str) -> tuple[str, ...]:
    """The parts one read fills."""
    if item == PODS:
        return (PODS_PART,)
    if item == EVENTS:
        return (EVENTS_PART,)
    return (metric_part(item),)


class JobReads:
    """One target's per-job reads, and the metric series of the jobs it watches."""

    def __init__(
        self,
        client: AihcClient,
        target: AihcTarget,
        metrics: SelfMetrics,
        life: AihcLifecycle,
        drop: Callable[[str], None],
        folds: FoldLog,
    ) -> None:
        self.client = client
        self.config = target
        self.metrics = metrics
        self.life = life
        self.drop = drop
        self.events = EventReader(client, metrics, folds, life)
        self.phases = Seen(KNOWN_POD_PHASES, label="phase", folds=folds)
        # The jobs whose metric types are read: their series are kept between rounds.
        self.watched: set[str] = set()
        self.jobs: dict[str, JobSeries] = {}

    def keep(self, watched: Collection[str]) -> None:
        """Forget the series of jobs no longer watched."""
        for job_id in [j for j in self.jobs if j not in watched]:
            del self.jobs[job_id]

    async def read(self, who: JobIdentity, item: str, context: ReadContext) -> ReadResult:
        result = ReadResult(who.job_id)
        try:
            if item == PODS:
                await self._read_pods(who, result, context)
            elif item == EVENTS:
                result.outcomes[EVENTS_PART] = await self.events.read(who, context)
            else:
                await self._read_metric(who, item, result, context)
        except ApiError as exc:
            if exc.code == NOT_FOUND and (item == PODS or await self._deleted(who, context)):
                # Deleted since the list named it: gone, and not a failure.
                result.gone = True
            else:
                result.failed = True
                result.outcomes = dict.fromkeys(parts_of(item), FAILED)
        return result

    async def _deleted(self, who: JobIdentity, context: ReadContext) -> bool:
        """Whether DescribeJob says the job is gone: only its 404 means that. A 404 on a
        metric type or the events is confirmed with this one call before the job is dropped."""
        try:
            await self.client.describe_job(who.job_id, who.queue, context.deadline)
        except ApiError as exc:
            return exc.code == NOT_FOUND
        return False

    def _count_dropped(self, reply: Tolerant) -> None:
        """Count the list elements a reply lost to their shape (see `kit.decode.each`)."""
        for reason, count in reply.dropped.items():
            self.metrics.drop(NAME, reason, count)

    def _series(self, job_id: str) -> JobSeries:
        state = self.jobs.get(job_id)
        if state is None:
            state = self.jobs[job_id] = JobSeries(self.config.usage_unit, self.drop)
        return state

    async def _read_pods(self, who: JobIdentity, result: ReadResult, context: ReadContext) -> None:
        detail = await self.client.describe_job(who.job_id, who.queue, context.deadline)
        self._count_dropped(detail)
        restarting = self.life.detail(who, detail, context.now)
        pods = mapping.unique_pods(detail.pods or [])
        for pod in pods:
            self.phases.add(mapping.pod_phase(pod))
        if who.job_id in self.watched:
            self._series(who.job_id).pods = {p.name for p in pods}
        samples = mapping.pod_samples(pods, who, self.phases.values, self.drop)
        result.outcomes[PODS_PART] = (*samples, *restarting)

    async def _read_metric(
        self, who: JobIdentity, metric_type: str, result: ReadResult, context: ReadContext
    ) -> None:
        state = self._series(who.job_id)
        end = int(context.now)
        step = max(1, int(self.config.time_step))
        start = state.window_start(metric_type, end, step, self.config.first_window_steps)
        reply = await self.client.describe_job_metrics(
            who.job_id, who.queue, metric_type, start, end, step, context.deadline
        )
        for reason, count in reply.dropped.items():
            self.metrics.drop(NAME, reason, count)
        result.outcomes[metric_part(metric_type)] = state.add_reply(metric_type, who, reply)
        result.outcomes[LAST_SAMPLE_PART] = state.last_samples(who)
