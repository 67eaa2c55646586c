"""Provider clients, one per configured target."""

from __future__ import annotations

from exporter.config import AihcTarget, AlayaTarget
from exporter.providers.base import PollContext, Provider
from exporter.selfmetrics import SelfMetrics

__all__ = ["PollContext", "Provider", "build_provider"]


def build_provider(target: AihcTarget | AlayaTarget, metrics: SelfMetrics) -> Provider:
    if isinstance(target, AihcTarget):
        from exporter.providers.aihc import AihcProvider

        return AihcProvider(target, metrics)
    from exporter.providers.alaya import AlayaProvider

    return AlayaProvider(target, metrics)
