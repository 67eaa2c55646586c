"""Helpers for the AIHC provider tests: the real AihcProvider against a served simulator."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import SecretStr

from bench.oneshot import PollResult, read_all
from exporter.model import FAILED, Failed, Sample
from exporter.providers.aihc import AihcProvider, AihcTarget
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from exporter.targets import tier_plan

POOL = "cce-test0001"
QUEUES = ("q-alpha", "q-beta", "q-gamma")
# The `world` fixture's jobs, unless a test asks for another number with `jobs`.
JOBS = 23


def jobs(n: int) -> pytest.MarkDecorator:
    """A test's `world` (and `harness`) of `n` jobs instead of `JOBS`: a poll of all 22 metric
    types makes 24 calls a job, and a test whose claim holds for a few jobs pays for a few."""
    return pytest.mark.parametrize("world", [n], indirect=True, ids=[f"{n}-jobs"])


@dataclass
class Harness:
    world: AihcWorld
    simulator: Simulator
    url: str
    metrics: SelfMetrics = field(default_factory=SelfMetrics)
    _providers: list[AihcProvider] = field(default_factory=list)

    def target(self, **overrides: Any) -> AihcTarget:
        values: dict[str, Any] = {
            "name": "aihc-test",
            "endpoint": self.url,
            "access_key_id": SecretStr(DEMO_ACCESS_KEY_ID),
            "secret_access_key": SecretStr(DEMO_SECRET_ACCESS_KEY),
            "resource_pool_id": POOL,
            "page_size": 10,
            # No request budget and quick retries: tests count calls, not seconds.
            "limits": {"requests_per_second": 0, "retries": 2, "timeout": 5},
        }
        values.update(overrides)
        return AihcTarget.model_validate(values)

    def provider(self, clock: Callable[[], float] = time.time, **overrides: Any) -> AihcProvider:
        target = self.target(**overrides)
        provider = AihcProvider(target, self.metrics, tier_plan(target, 60.0), clock=clock)
        self._providers.append(provider)
        return provider

    async def poll(
        self, provider: AihcProvider, owns: Callable[[str], bool] | None = None
    ) -> PollResult:
        context = PollContext(
            deadline=time.monotonic() + 30,
            started_at=time.time(),
            owns_job=owns or (lambda job_id: True),
        )
        return await read_all(provider, context)

    def dropped(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "training_exporter_dropped_values_total", {"provider": "aihc", "reason": reason}
        )
        return value or 0.0

    async def close(self) -> None:
        for provider in self._providers:
            await provider.close()


def samples(result: PollResult, job_id: str | None = None) -> list[Sample]:
    """Every sample of the result (of one job), failed parts left out."""
    found: list[Sample] = []
    for jid, parts in result.jobs.items():
        if job_id is not None and jid != job_id:
            continue
        for outcome in parts.values():
            if not isinstance(outcome, Failed):
                found.extend(outcome.samples)
    return found


def named(found: Iterable[Sample], name: str) -> list[Sample]:
    return [s for s in found if s.name == name]


def labels(sample: Sample) -> dict[str, str]:
    return dict(zip(sample.label_names, sample.label_values, strict=True))


def failed_parts(result: PollResult) -> set[tuple[str, str]]:
    return {(j, p) for j, parts in result.jobs.items() for p, o in parts.items() if o is FAILED}
