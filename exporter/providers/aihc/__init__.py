"""Baidu AIHC (百舸) provider: bce-auth-v1 signed OpenAPI v2 calls, mapped to the contract."""

from __future__ import annotations

from exporter.providers.aihc.history import AihcHistory
from exporter.providers.aihc.provider import AihcProvider
from exporter.providers.aihc.target import METRIC_BY_TYPE, AihcTarget
from exporter.providers.spec import ProviderSpec

PROVIDER = ProviderSpec(
    target=AihcTarget,
    label="AIHC",
    title="Baidu AIHC",
    metric_types=METRIC_BY_TYPE,
    build=AihcProvider,
    simulated="exporter.simulator.aihc_service:SIMULATED",
    history=AihcHistory,
)

__all__ = ["PROVIDER", "AihcProvider", "AihcTarget"]
