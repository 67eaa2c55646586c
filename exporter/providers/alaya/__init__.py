"""Alaya NeW Cloud: `target`, `client`, `models`, `mapping`, `discovery` (which jobs: configured,
`jobsfile`, `listing`) and `provider`.

The package itself holds the target model and the spec; the poller, the history reader and
the job discovery are imported when first used (`exporter.providers.spec.lazy`, and the
names below)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exporter.providers.alaya.target import (
    METRIC_BY_TYPE,
    AlayaJob,
    AlayaTarget,
)
from exporter.providers.spec import ProviderSpec, lazy, lazy_names

if TYPE_CHECKING:
    from exporter.providers.alaya.discovery import JobSource, JobTarget, StaticJobs
    from exporter.providers.alaya.provider import AlayaProvider

PROVIDER = ProviderSpec(
    target=AlayaTarget,
    label="Alaya",
    title="Alaya NeW Cloud",
    metric_types=METRIC_BY_TYPE,
    build=lazy("exporter.providers.alaya.provider:AlayaProvider"),
    simulated="exporter.simulator.alaya_service:SIMULATED",
    history=lazy("exporter.providers.alaya.history:AlayaHistory"),
)

# Imported at first use: name -> its module.
__getattr__ = lazy_names(
    __name__,
    {
        "AlayaProvider": "exporter.providers.alaya.provider",
        "JobSource": "exporter.providers.alaya.discovery",
        "JobTarget": "exporter.providers.alaya.discovery",
        "StaticJobs": "exporter.providers.alaya.discovery",
    },
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
