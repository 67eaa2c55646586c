"""Refresh tiers: which per-job calls are made how often.

Every call a target makes per job is an *item*, and every item belongs to one of three tiers:
fast runs every `poll_interval` with the job list, medium and slow every 5 and 15 poll
intervals by default. Each item's default tier is its provider's (`TargetBase.default_tiers`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, get_args

from exporter.configkit import TargetBase, TierName
from exporter.providers.base import TierPlan

# The tier names, fastest first, as the configuration spells them.
TIERS: Final[tuple[str, ...]] = get_args(TierName)
# Default intervals as multiples of the target's poll interval (the fast tier's).
DEFAULT_MULTIPLES: Final[Mapping[str, float]] = {"fast": 1.0, "medium": 5.0, "slow": 15.0}


def default_tier(provider: str, item: str) -> TierName:
    """`item`'s default tier, found among the target models: the registry sits above this layer."""
    for model in TargetBase.__subclasses__():
        if model.provider == provider:
            return model.default_tiers[item]
    raise KeyError(provider)


def resolve(
    provider: str,
    items: Iterable[str],
    poll_interval: float,
    intervals: Mapping[str, float | None],
    moves: Mapping[str, str],
    first: Iterable[str] = (),
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
    return TierPlan(
        resolved, {tier: tuple(found) for tier, found in members.items()}, frozenset(first)
    )


def target_tiers(target: TargetBase, items: Sequence[str], poll_interval: float) -> TierPlan:
    """The tiers of a configured target reading `items`, fast every `poll_interval`."""
    provider = target.provider
    intervals = {"medium": target.tiers.medium, "slow": target.tiers.slow}
    return resolve(provider, items, poll_interval, intervals, target.tiers.move, target.state_items)
