"""The fake provider, and `PROVIDER`, its spec: what the entry point names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exporter.model import FAILED
from exporter.providers.base import Listing, PollContext, ReadContext, ReadResult, Unit
from exporter.providers.spec import ProviderSpec
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError
from tests.providers.fake.client import FakeClient
from tests.providers.fake.mapping import METRIC_BY_TYPE, load_samples, status_samples
from tests.providers.fake.target import LOAD, NAME, FakeTarget

if TYPE_CHECKING:
    from exporter.providers.base import TierPlan

STATUS = "status"


class FakeProvider:
    provider = NAME

    def __init__(self, target: FakeTarget, metrics: SelfMetrics, tiers: TierPlan) -> None:
        self.config = target
        self.target = target.name
        self.tiers = tiers
        self.client = FakeClient(target, metrics)
        self.gate = self.client.api.gate
        self.call_log = self.client.api.call_log
        self._jobs = 0

    async def list_jobs(self, context: PollContext) -> Listing:
        out = Listing(requests=1)
        try:
            listed = await self.client.jobs(context.deadline)
        except ApiError:
            out.listed = False
            out.failed_requests += 1
            return out
        jobs = [job for job in listed.jobs if context.owns_job(job.id)]
        self._jobs = len(jobs)
        for job in jobs:
            out.parts[job.id] = frozenset({STATUS, *(f"{pod}:{LOAD}" for pod in job.pods)})
            out.readings[job.id] = {STATUS: status_samples(job)}
            out.units.extend(Unit((job.id, pod), job.id, (LOAD,)) for pod in job.pods)
        return out

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult:
        job_id, pod = unit.key  # type: ignore[misc]
        result = ReadResult(job_id)
        part = f"{pod}:{item}"
        try:
            load = await self.client.load(job_id, pod, context.deadline)
        except ApiError:
            result.failed = True
            result.outcomes[part] = FAILED
            return result
        result.outcomes[part] = load_samples(job_id, pod, load.gpu)
        return result

    async def close(self) -> None:
        await self.client.close()

    def describe(self) -> dict[str, str]:
        return {"endpoint": self.config.endpoint, "jobs": str(self._jobs)}


PROVIDER = ProviderSpec(
    target=FakeTarget,
    label="Fake",
    title="the fake cloud of the tests",
    metric_types=METRIC_BY_TYPE,
    build=FakeProvider,
    simulated="tests.providers.fake.server:SIMULATED",
)
