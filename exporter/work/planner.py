"""A target's plan as its listings change it: made for the counts each listing found, put in
the plan's metrics, and logged when it stops fitting the budget, moves, or fits again; and
whether the target's calls are behind their tiers, logged on each change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from exporter.logs import OnChange, get_logger
from exporter.selfmetrics import SelfMetrics
from exporter.work.plan import Plan, make_plan
from exporter.work.tiers import TIERS

log = get_logger(__name__)

# A plan is logged again when an effective interval moved by more than this fraction.
PLAN_LOG_CHANGE: Final = 0.1


class Planner:
    def __init__(
        self,
        labels: tuple[str, str],
        metrics: SelfMetrics,
        intervals: Mapping[str, float],
        budget: float | None,
        workers: int,
    ) -> None:
        self.labels, self.metrics = labels, metrics
        self.intervals, self.budget, self.workers = intervals, budget, workers
        self.plan: Plan = self.make(dict.fromkeys(TIERS, 0))
        self._logged: Plan | None = None
        self._behind = OnChange(False)

    def carry(self, previous: Planner) -> None:
        """The plan for `previous`'s counts (a reload), at this target's intervals and budget."""
        counts = previous.plan.requests_per_read
        self.plan = self.make({t: counts.get(t, 0) for t in TIERS})

    def make(self, requests_per_read: Mapping[str, int]) -> Plan:
        return make_plan(requests_per_read, self.intervals, self.budget, self.workers)

    def replan(self, requests_per_read: Mapping[str, int]) -> None:
        """The plan for these counts, in the metrics and, when it changed enough, the log."""
        self.plan = self.make(requests_per_read)
        self.publish()
        self._log()

    def publish(self) -> None:
        """The plan's metrics: the budget, what the plan needs, each tier's interval."""
        provider, target = self.labels
        self.metrics.budget_required.labels(provider, target).set(self.plan.required)
        if self.budget is not None:
            self.metrics.budget.labels(provider, target).set(self.budget)
        for tier, seconds in self.plan.effective.items():
            self.metrics.tier_interval.labels(provider, target, tier).set(seconds)

    def lag(self, seconds: float) -> None:
        """Calls were taken up to `seconds` after their release: more than a round is an
        overrun, counted, and logged when it starts and when it ends."""
        behind = seconds > self.plan.effective["fast"]
        if behind:
            self.metrics.poll_overruns.labels(*self.labels).inc()
        if self._behind.changed(behind):
            emit = log.warning if behind else log.info
            emit(
                "calls are behind their tiers by more than a round"
                if behind
                else "calls caught up with their tiers",
                provider=self.labels[0],
                target=self.labels[1],
                lag_seconds=round(seconds, 1),
                **self.plan.describe(),
            )

    def _log(self) -> None:
        """Once when the plan needs more than the budget, again when an effective interval
        moves by more than PLAN_LOG_CHANGE, and once when it fits again."""
        logged, plan = self._logged, self.plan
        if logged is None:
            moved = plan.exceeds
        else:
            moved = not plan.exceeds or any(
                abs(plan.effective[t] - s) > PLAN_LOG_CHANGE * s
                for t, s in logged.effective.items()
            )
        if not moved:
            return
        self._logged = plan if plan.exceeds else None
        provider, target = self.labels
        if plan.exceeds:
            log.warning(
                "plan needs more requests than the budget: slower tiers stretched",
                provider=provider,
                target=target,
                **plan.describe(),
            )
        else:
            log.info("plan fits the budget again", provider=provider, target=target)
