"""Alaya's history for `backfill`: the target's jobs (configured, jobs file, or the job list
with every status), then per pod one `basic` (for `training_pod_info`) and, per type,
`gpu-metrics` over explicit startTime/endTime windows of `WINDOW` seconds.

Each point of `metricData` becomes a sample of the live family for its type
(`training_pod_gpu_utilization_ratio{gpu=...}` and friends), labelled as the live mapping
labels them. The window max / avg gauges are left out: they are aggregates of the live query
window, not points.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Final
from zoneinfo import ZoneInfo

from exporter.metrics import KNOWN_POD_PHASES
from exporter.model import CARD_LABELS, POD_LABELS
from exporter.providers.alaya.client import PERIOD_SECONDS, TIME_FORMAT, AlayaClient, Window
from exporter.providers.alaya.mapping import (
    PER_CARD_TYPES,
    PodKey,
    basic_samples,
    job_samples,
    local_time,
    parse_number,
    window_names,
)
from exporter.providers.alaya.models import JobRecord, Point, valid_items
from exporter.providers.alaya.models import Series as Element
from exporter.providers.alaya.provider import job_source
from exporter.providers.alaya.target import AlayaTarget
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
from exporter.providers.kit.labels import label
from exporter.providers.kit.numbers import DUPLICATE_SERIES, INVALID_SERIES, in_range, timestamp
from exporter.providers.kit.windows import over, windows
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError

if TYPE_CHECKING:
    from exporter.providers.base import TierPlan

# Seconds per gpu-metrics call. Sample spacing grows with the window (the simulator keeps a
# reply near 120 points: 60 s up to 2 h, 120 s up to 4 h), so 2 h is the longest window read
# at the finest spacing: 12 calls per pod, type and day.
WINDOW: Final = 7200
NOT_FOUND: Final = "404"


class AlayaHistory:
    provider = "alaya"

    def __init__(self, target: AlayaTarget, metrics: SelfMetrics, tiers: TierPlan) -> None:
        """`tiers` is unused: the history reads every configured type, whatever its tier."""
        self.config = target
        self.target = target.name
        self._metrics = metrics
        self._zone = ZoneInfo(target.time_zone)
        self._client = AlayaClient(target, metrics)
        self.gate = self._client.gate
        # Finished jobs too, and pods for every listed job (named, or by pod_pattern).
        every_status = target.model_copy(update={"list_statuses": [], "metric_statuses": []})
        self._source = job_source(every_status, self._client, metrics)

    def retention(self) -> tuple[float, str] | None:
        return PERIOD_SECONDS["30d"], "gpu-metrics offers periods up to 30d"

    def _drop(self, reason: str) -> None:
        self._metrics.drop(self.provider, reason)

    async def jobs(self, since: float, until: float) -> Sequence[JobRef]:
        found = []
        for job in await self._source.jobs(PollContext(call_deadline(), time.time())):
            record = job.record
            if record is not None:
                created = local_time(record.created_time, self._zone, self._drop)
                finished = local_time(record.finished_time, self._zone, self._drop)
                if (created is not None and created > until) or (
                    finished is not None and finished < since
                ):
                    continue
            dumped = record.model_dump(mode="json", by_alias=True) if record else None
            found.append(JobRef(job.job_id, {"pods": list(job.pods), "record": dumped}))
        return found

    def _record(self, ref: JobRef) -> JobRecord | None:
        raw = ref.data.get("record")
        return JobRecord.model_validate(raw) if raw is not None else None

    async def describe(self, ref: JobRef, since: float, until: float) -> Described:
        record = self._record(ref)
        created = finished = None
        series: list[Series] = []
        if record is not None:
            created = local_time(record.created_time, self._zone, self._drop)
            finished = local_time(record.finished_time, self._zone, self._drop)
        start = max(since, created or since)
        if record is not None:
            status_from = max(start, finished) if finished is not None else start
            for sample in job_samples(record, self._zone, self._drop):
                if sample.name == "training_job_info":
                    series.append(over(sample, start, until))
                elif sample.name == "training_job_status":
                    series.append(over(sample, status_from, until))
        if self.config.pod_details:
            for pod in ref.data["pods"]:
                series += await self._pod_info(ref.job_id, pod, start, until)
        end = min(until, finished + 60) if finished is not None else until
        return Described(series, {"start": start, "end": end})

    async def _pod_info(self, job_id: str, pod: str, start: float, until: float) -> list[Series]:
        try:
            basic = await self._client.pod_basic(job_id, pod, call_deadline())
        except ApiError as exc:
            if exc.code == NOT_FOUND:
                return []
            raise
        born = local_time(basic.create_time, self._zone, self._drop)
        key = PodKey(job_id, pod)
        return [
            over(sample, max(start, born or start), until)
            for sample in basic_samples(key, basic, self._drop, KNOWN_POD_PHASES)
            if sample.name == "training_pod_info"
        ]

    def tasks(self, ref: JobRef, facts: Facts, since: float, until: float) -> list[Task]:
        spans = windows(float(facts["start"]), float(facts["end"]), WINDOW)
        return [
            Task(json.dumps([pod, metric_type, start]), metric_type, start, end, pod)
            for pod in ref.data["pods"]
            for metric_type in self.config.types
            for start, end in spans
        ]

    def _window(self, start: int, end: int) -> Window:
        def local(at: int) -> str:
            return datetime.fromtimestamp(at, self._zone).strftime(TIME_FORMAT)

        # A one-second window (a span's last) is refused as startTime == endTime: ask from a
        # second before; points before `start` are left out by `read`.
        start = min(start, end - 1)
        return Window(end - start, start_time=local(start), end_time=local(end))

    async def read(self, ref: JobRef, facts: Facts, task: Task) -> list[Series]:
        key = PodKey(ref.job_id, task.unit)
        try:
            data = await self._client.gpu_metrics(
                ref.job_id,
                task.unit,
                task.item,
                self._window(task.start, task.end),
                call_deadline(),
            )
        except ApiError as exc:
            if exc.code == NOT_FOUND:
                raise HistoryUnavailable(str(exc)) from None
            raise
        name = window_names(task.item)[0]
        per_card = task.item in PER_CARD_TYPES
        found: dict[tuple[str, ...], Series] = {}
        for element in valid_items(Element, data.series):
            if element is None:
                self._drop(INVALID_SERIES)
                continue
            values = (*key.labels, label(element.gpu_name or "")) if per_card else key.labels
            if values in found:
                self._drop(DUPLICATE_SERIES)
                continue
            series = found[values] = Series(name, CARD_LABELS if per_card else POD_LABELS, values)
            for point in valid_items(Point, element.points):
                if point is None:
                    continue
                at = timestamp(point.timestamp, self._drop)
                if at is None or not task.start <= at <= task.end:
                    continue
                value = in_range(name, parse_number(point.value, self._drop), self._drop)
                if value is not None:
                    series.points.append((at, value))
        return list(found.values())

    async def close(self) -> None:
        await self._source.close()
        await self._client.close()
