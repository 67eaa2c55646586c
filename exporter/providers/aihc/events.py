"""One read of a job's events: their counts as samples, event types outside Normal/Warning and
the reasons past `mapping.MAX_EVENT_REASONS` summed as `other` and told to the target's
`FoldLog` (logged with their raw values at most once a minute per label), and the events
handed to the job's lifecycle as evidence of why it failed."""

from __future__ import annotations

from functools import partial

from exporter.model import Sample
from exporter.providers.aihc import mapping
from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.lifecycle import AihcLifecycle
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.target import NAME
from exporter.providers.base import ReadContext
from exporter.providers.kit.folds import FoldLog
from exporter.selfmetrics import SelfMetrics


class EventReader:
    def __init__(
        self, client: AihcClient, metrics: SelfMetrics, folds: FoldLog, life: AihcLifecycle
    ) -> None:
        self.client, self.metrics, self.folds, self.life = client, metrics, folds, life

    async def read(self, who: JobIdentity, context: ReadContext) -> tuple[Sample, ...]:
        reply = await self.client.job_events(who.job_id, context.deadline)
        for reason, count in reply.dropped.items():
            self.metrics.drop(NAME, reason, count)
        events = reply.events or []
        self.life.events(who.job_id, events)
        return mapping.event_samples(events, who, partial(self.metrics.drop, NAME), self._folded)

    def _folded(self, label: str, values: frozenset[str]) -> None:
        """Event types and reasons summed as `other`, for the target's fold log."""
        cap = mapping.MAX_EVENT_REASONS if label == "reason" else len(mapping.EVENT_TYPES)
        self.folds.folded(label, values, cap)
