"""From a configured target to the provider that polls it.

Here, above the providers, because a provider is handed its refresh tiers
(`exporter.work.tiers`, the poll core's) rather than computing them: the providers' folders
import nothing above themselves, which `make lint`'s import contracts hold them to.
"""

from __future__ import annotations

from exporter.configkit import TargetBase
from exporter.providers.base import Provider, TierPlan
from exporter.providers.registry import spec_of
from exporter.selfmetrics import SelfMetrics
from exporter.work.tiers import target_tiers


def tier_plan(target: TargetBase, poll_interval: float) -> TierPlan:
    """The tiers of `target`'s items, its fast tier every `poll_interval`."""
    return target_tiers(target, target.read_items(), poll_interval)


def build_provider(target: TargetBase, metrics: SelfMetrics, poll_interval: float) -> Provider:
    """The provider of a configured target whose fast tier runs every `poll_interval`."""
    return spec_of(target).build(target, metrics, tier_plan(target, poll_interval))
