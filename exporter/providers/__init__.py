"""Provider clients, one per configured target."""

from __future__ import annotations

from exporter.config import AihcTarget, AlayaTarget
from exporter.providers.base import PollContext, Provider
from exporter.selfmetrics import SelfMetrics

__all__ = ["PollContext", "Provider", "build_provider"]


def build_provider(
    target: AihcTarget | AlayaTarget, metrics: SelfMetrics, poll_interval: float
) -> Provider:
    """The provider of a configured target whose fast tier runs every `poll_interval`."""
    if isinstance(target, AihcTarget):
        from exporter.providers.aihc import AihcProvider

        return AihcProvider(target, metrics, poll_interval=poll_interval)
    from exporter.providers.alaya import AlayaProvider

    return AlayaProvider(target, metrics, poll_interval=poll_interval)
