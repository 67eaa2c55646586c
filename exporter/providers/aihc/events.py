"""One read of a job's events: their counts as samples, the reasons summed as `other` past
`mapping.MAX_EVENT_REASONS` logged with their raw values once per change per job, and the
events handed to the job's lifecycle as evidence of why it failed."""

from __future__ import annotations

from collections.abc import Collection
from functools import partial

from exporter.logs import get_logger
from exporter.model import Sample
from exporter.providers.aihc import mapping
from exporter.providers.aihc.client import AihcClient
from exporter.providers.aihc.lifecycle import AihcLifecycle
from exporter.providers.aihc.mapping import JobIdentity
from exporter.providers.aihc.target import NAME
from exporter.providers.base import ReadContext
from exporter.selfmetrics import SelfMetrics
from exporter.status import redact

log = get_logger(__name__)


class EventReader:
    def __init__(
        self, client: AihcClient, metrics: SelfMetrics, target: str, life: AihcLifecycle
    ) -> None:
        self.client, self.metrics, self.target, self.life = client, metrics, target, life
        # job -> the raw reasons last summed as `other`.
        self._folded: dict[str, frozenset[str]] = {}

    async def read(self, who: JobIdentity, context: ReadContext) -> tuple[Sample, ...]:
        reply = await self.client.job_events(who.job_id, context.deadline)
        for reason, count in reply.dropped.items():
            self.metrics.drop(NAME, reason, count)
        events = reply.events or []
        self.life.events(who.job_id, events)
        return mapping.event_samples(
            events, who, partial(self.metrics.drop, NAME), partial(self._log_folded, who.job_id)
        )

    def _log_folded(self, job_id: str, reasons: frozenset[str]) -> None:
        if reasons == self._folded.get(job_id, frozenset()):
            return
        self._folded[job_id] = reasons
        if reasons:
            log.warning(
                "event reasons past max_reasons summed as reason other",
                provider=NAME,
                target=self.target,
                job_id=job_id,
                max_reasons=mapping.MAX_EVENT_REASONS,
                folded=len(reasons),
                reasons=[redact(r, 64) for r in sorted(reasons)[: mapping.MAX_EVENT_REASONS]],
            )

    def keep(self, job_ids: Collection[str]) -> None:
        for job_id in [j for j in self._folded if j not in job_ids]:
            del self._folded[job_id]
