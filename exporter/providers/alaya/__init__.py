"""Alaya NeW Cloud: `target`, `client`, `models`, `mapping`, `discovery` (which jobs: configured,
`jobsfile`, `listing`) and `provider`."""

from __future__ import annotations

from exporter.providers.alaya.discovery import JobSource, JobTarget, StaticJobs
from exporter.providers.alaya.history import AlayaHistory
from exporter.providers.alaya.provider import AlayaProvider
from exporter.providers.alaya.target import (
    METRIC_BY_TYPE,
    AlayaJob,
    AlayaTarget,
)
from exporter.providers.spec import ProviderSpec

PROVIDER = ProviderSpec(
    target=AlayaTarget,
    label="Alaya",
    title="Alaya NeW Cloud",
    metric_types=METRIC_BY_TYPE,
    build=AlayaProvider,
    simulated="exporter.simulator.alaya_service:SIMULATED",
    history=AlayaHistory,
)

__all__ = [
    "PROVIDER",
    "AlayaJob",
    "AlayaProvider",
    "AlayaTarget",
    "JobSource",
    "JobTarget",
    "StaticJobs",
]
