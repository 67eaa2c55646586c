"""Aihc provider (placeholder until its issue lands)."""

from __future__ import annotations

from exporter.config import AihcTarget
from exporter.model import PollResult
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics


class AihcProvider:
    provider = "aihc"

    def __init__(self, target: AihcTarget, metrics: SelfMetrics) -> None:
        self.config = target
        self.target = target.name
        self.metrics = metrics

    async def poll(self, context: PollContext) -> PollResult:
        return PollResult()

    async def close(self) -> None:
        return None

    def describe(self) -> dict[str, str]:
        return {"endpoint": self.config.endpoint}
