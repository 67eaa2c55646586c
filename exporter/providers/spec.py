"""What a provider's folder exports: one `ProviderSpec`, everything the rest of the exporter
needs to know about the provider (its configuration model, metric types, factories, docs and
demo), so that adding a provider is its folder and one line in `exporter.providers.registry`,
or an entry point, and nothing outside the folder names it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exporter.configkit import TargetBase, TierName

if TYPE_CHECKING:
    from exporter.providers.base import Provider, TierPlan
    from exporter.providers.kit.history import HistoryReader
    from exporter.selfmetrics import SelfMetrics

    # (its target, the self-metrics, the target's tiers) -> the provider polling the target.
    Factory = Callable[[Any, SelfMetrics, TierPlan], Provider]
    # The same, for the reader of its history that `backfill` walks.
    HistoryFactory = Callable[[Any, SelfMetrics, TierPlan], HistoryReader]


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    # The model of one target (`exporter.configkit.TargetBase`): its `provider` name, its
    # `items` (per-unit calls) and their `default_tiers`.
    target: type[TargetBase]
    # How the reference names it ("AIHC GpuUsage / Alaya gpu").
    label: str
    # The service's full name, for the landing page and --help ("Baidu AIHC").
    title: str
    # Upstream metric type -> the `training_pod_*` family it fills (`exporter.metrics`).
    metric_types: Mapping[str, str]
    build: Factory
    # "module:attribute" of its fake service (`exporter.simulator.service.SimulatedProvider`),
    # which the simulator serves and the demo polls; "" for none. Named, not imported: the
    # fakes sit above the providers they imitate (they sign and decode with the provider's own
    # code), and the exporter's run path never loads them.
    simulated: str = ""
    # Its history reader for `training-job-exporter backfill`; None: it has none to offer.
    history: HistoryFactory | None = None

    @property
    def name(self) -> str:
        """The key of its target list in the configuration file, its `provider` label, and
        the `TJE_{NAME}_{SECRET}` of its secrets: a lowercase identifier."""
        return self.target.provider

    @property
    def items(self) -> tuple[str, ...]:
        return self.target.items

    @property
    def default_tiers(self) -> Mapping[str, TierName]:
        return self.target.default_tiers


def lazy(path: str) -> Callable[..., Any]:
    """The class or function `module:attribute`, imported at the first call: a provider's
    package names its poller and history reader this way, so that reading the configuration
    (the command line's exit 2, `--help`) does not import the HTTP client stack and the
    logging set-up behind them."""
    module, _, attribute = path.partition(":")

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), attribute)(*args, **kwargs)

    return call


def lazy_names(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module `__getattr__` (PEP 562) that imports each name of `modules` (name ->
    its module) at first use, as `lazy` does for the spec's factories."""

    def attribute(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(modules[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return attribute
