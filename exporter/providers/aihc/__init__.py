"""Baidu AIHC (百舸) provider: bce-auth-v1 signed OpenAPI v2 calls, mapped to the contract.

The package itself holds the target model and the spec; the poller and the history reader
are imported when first used (`exporter.providers.spec.lazy`, and `AihcProvider` here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from exporter.providers.aihc.target import METRIC_BY_TYPE, AihcTarget
from exporter.providers.spec import ProviderSpec, lazy, lazy_names

if TYPE_CHECKING:
    from exporter.providers.aihc.provider import AihcProvider

PROVIDER = ProviderSpec(
    target=AihcTarget,
    label="AIHC",
    title="Baidu AIHC",
    metric_types=METRIC_BY_TYPE,
    build=lazy("exporter.providers.aihc.provider:AihcProvider"),
    simulated="exporter.simulator.aihc_service:SIMULATED",
    history=lazy("exporter.providers.aihc.history:AihcHistory"),
)


# Imported at first use: name -> its module.
__getattr__ = lazy_names(__name__, {"AihcProvider": "exporter.providers.aihc.provider"})


__all__ = ["PROVIDER", "AihcProvider", "AihcTarget"]
