"""The plan's arithmetic: what tiers cost, and which stretch first when the budget is short."""

from __future__ import annotations

import pytest

from exporter.work.plan import HEADROOM, MAX_STRETCH, Plan, make_plan

CONFIGURED = {"fast": 60.0, "medium": 300.0, "slow": 900.0}


def asked(plan: Plan) -> float:
    """Requests per second the plan's effective intervals ask for."""
    return sum(n / plan.effective[t] for t, n in plan.requests_per_read.items() if n)


def test_a_plan_that_fits_keeps_the_configured_intervals() -> None:
    plan = make_plan({"fast": 200, "medium": 700, "slow": 1500}, CONFIGURED, budget=10)
    assert plan.required == pytest.approx(200 / 60 + 700 / 300 + 1500 / 900)
    assert plan.effective == CONFIGURED and not plan.exceeds


def test_the_slowest_tier_stretches_first_and_the_fast_one_last() -> None:
    # 250 jobs at the defaults: 503 fast (3 list pages), 1750 medium, 3750 slow calls a read.
    calls = {"fast": 503, "medium": 1750, "slow": 3750}
    plan = make_plan(calls, CONFIGURED, budget=10)
    assert plan.exceeds and plan.required == pytest.approx(503 / 60 + 1750 / 300 + 3750 / 900)
    # Slow and medium at their caps; fast takes what is left of 93 % of 10 requests/s.
    assert plan.effective["slow"] == 900 * MAX_STRETCH
    assert plan.effective["medium"] == 300 * MAX_STRETCH
    left = 10 * HEADROOM - 3750 / 3600 - 1750 / 1200
    assert plan.effective["fast"] == pytest.approx(503 / left)
    assert asked(plan) == pytest.approx(10 * HEADROOM)


def test_a_medium_tier_stretches_only_once_the_slow_one_is_at_its_cap() -> None:
    calls = {"fast": 100, "medium": 300, "slow": 1800}
    plan = make_plan(calls, CONFIGURED, budget=3)
    assert plan.effective["slow"] == 900 * MAX_STRETCH
    assert CONFIGURED["medium"] < plan.effective["medium"] < 300 * MAX_STRETCH
    assert plan.effective["fast"] == 60
    assert asked(plan) == pytest.approx(3 * HEADROOM)


def test_when_even_the_caps_do_not_fit_every_tier_stretches_alike() -> None:
    calls = {"fast": 6000, "medium": 100, "slow": 100}
    plan = make_plan(calls, CONFIGURED, budget=10)
    ratios = {t: plan.effective[t] / CONFIGURED[t] for t in CONFIGURED}
    assert ratios["slow"] == pytest.approx(ratios["medium"])
    assert ratios["fast"] > 1
    assert asked(plan) == pytest.approx(10 * HEADROOM)


def test_under_one_request_a_second_the_plan_says_how_long_calls_wait() -> None:
    # Shard 0 of 20 at 10 requests/s: a 0.5 share; 8 workers queue for it, the last 16 s.
    plan = make_plan({"fast": 3, "medium": 0, "slow": 0}, CONFIGURED, budget=0.5, workers=8)
    assert plan.slot_wait == 16.0
    assert plan.describe()["slot_wait_seconds"] == 16.0
