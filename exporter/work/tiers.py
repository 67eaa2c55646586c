"""Refresh tiers: which per-job calls are made how often.

Every call a target makes per job (AIHC: one DescribeJobMetrics per metric type, DescribeJob for
the pods, the events; Alaya: one gpu-metrics per type and the pod's `basic`) is an *item*, and
every item belongs to one of three tiers. The fast tier runs every `poll_interval` together
with the job list; medium and slow run every 5 and 15 poll intervals by default.

Defaults (why): most alerts and dashboards look at GPU utilisation and GPU memory, so on AIHC
those are fast. RDMA errors, CPU and memory, the tensor pipe and the pods (phases, restarts)
and events are medium: they drive alerts with `for: 10m` or slower. Temperature, power, RDMA
health, throughput rates, disk and packet rates change slowly or are read on dashboards only:
slow. At the default 10 requests/s a 60 s fast tier of two calls per job fits 250 jobs (500
calls a minute of 600); reading all 24 calls every minute would fit 25.

Alaya costs a call per pod and type, not per job: 500 pods with GPU utilisation and memory both
fast need 1,000 calls a minute, more than 10 requests/s give. So only `gpu` (per-card
utilisation) is fast there, and `vram`, `cpu`, `memory` and the pod's `basic` are medium; each
read also brings the window's max and average, so a 5-minute read loses no peak.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from exporter.config import AIHC_ITEMS, ALAYA_ITEMS, AihcTarget, AlayaTarget

TierName = Literal["fast", "medium", "slow"]
TIERS: Final[tuple[str, ...]] = ("fast", "medium", "slow")
# Default intervals as multiples of the target's poll interval (the fast tier's).
DEFAULT_MULTIPLES: Final[Mapping[str, float]] = {"fast": 1.0, "medium": 5.0, "slow": 15.0}

AIHC_PODS: Final = "pods"
AIHC_EVENTS: Final = "events"
ALAYA_BASIC: Final = "basic"
assert AIHC_PODS in AIHC_ITEMS and AIHC_EVENTS in AIHC_ITEMS and ALAYA_BASIC in ALAYA_ITEMS

AIHC_DEFAULT_FAST: Final = frozenset({"GpuUsage", "GpuMemoryUsage"})
AIHC_DEFAULT_MEDIUM: Final = frozenset(
    {
        "RDMASendErrorRate",
        "RDMARecvErrorRate",
        "CpuUsage",
        "MemoryUsage",
        "GpuPipeTensorUsage",
        AIHC_PODS,
        AIHC_EVENTS,
    }
)
ALAYA_DEFAULT_FAST: Final = frozenset({"gpu"})


def default_tier(provider: str, item: str) -> TierName:
    if provider == "aihc":
        if item in AIHC_DEFAULT_FAST:
            return "fast"
        return "medium" if item in AIHC_DEFAULT_MEDIUM else "slow"
    return "fast" if item in ALAYA_DEFAULT_FAST else "medium"


@dataclass(frozen=True, slots=True)
class TierPlan:
    """A target's tiers: configured interval and items of each, in TIERS order."""

    intervals: Mapping[str, float]
    items: Mapping[str, tuple[str, ...]]

    def tier_of(self, item: str) -> str:
        for tier, items in self.items.items():
            if item in items:
                return tier
        raise KeyError(item)


def resolve(
    provider: str,
    items: Iterable[str],
    poll_interval: float,
    intervals: Mapping[str, float | None],
    moves: Mapping[str, str],
) -> TierPlan:
    """Each item's tier (defaults, then `moves`) and each tier's interval (set, or a default
    multiple of `poll_interval`). Intervals never go below the fast tier's."""
    resolved = {
        tier: max(poll_interval, intervals.get(tier) or DEFAULT_MULTIPLES[tier] * poll_interval)
        for tier in TIERS
    }
    resolved["fast"] = poll_interval
    members: dict[str, list[str]] = {tier: [] for tier in TIERS}
    for item in items:
        members[moves.get(item) or default_tier(provider, item)].append(item)
    return TierPlan(resolved, {tier: tuple(found) for tier, found in members.items()})


def target_tiers(
    target: AihcTarget | AlayaTarget, items: Sequence[str], poll_interval: float
) -> TierPlan:
    """The tiers of a configured target reading `items`, fast every `poll_interval`."""
    provider = "aihc" if isinstance(target, AihcTarget) else "alaya"
    intervals = {"medium": target.tiers.medium, "slow": target.tiers.slow}
    return resolve(provider, items, poll_interval, intervals, target.tiers.move)
