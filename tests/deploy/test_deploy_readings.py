"""Every alert's `for` covers two readings of each exporter series it reads: the refresh tier
of each series comes from the exporter's own defaults (an AIHC target at a 60 s poll), through
every recording rule between the series and the alert; the alert must wait for the next read
of the slowest and `MARGIN` more, for the scrape and the evaluation that bring it."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from deploy_helpers import alert_rules, lifecycle_rules, rank_rules, seconds, selectors
from pydantic import SecretStr

from exporter.providers.aihc.target import EVENTS, METRIC_BY_TYPE, PODS, AihcTarget
from exporter.targets import tier_plan

MARGIN = 300.0
POLL = 60.0
_PLAN = tier_plan(
    AihcTarget(
        name="t",
        resource_pool_id="cce-1",
        access_key_id=SecretStr("ak"),
        secret_access_key=SecretStr("sk"),
    ),
    POLL,
)
_BY_ITEM = {
    PODS: ("training_pod_phase", "training_pod_info", "training_pod_restarts"),
    EVENTS: ("training_job_events_total", "training_job_last_event_timestamp_seconds"),
}


def series_interval(metric: str) -> float | None:
    """How often the exporter reads `metric` by default; None for its own series."""
    if metric.startswith("training_exporter_"):
        return None
    for metric_type, name in METRIC_BY_TYPE.items():
        if name == metric:
            return _PLAN.intervals[_PLAN.tier_of(metric_type)]
    for item, names in _BY_ITEM.items():
        if metric in names:
            return _PLAN.intervals[_PLAN.tier_of(item)]
    # The job list's series, and the last sample time any read moves: every poll.
    return POLL


def _matches(labels: dict[str, str], matchers: tuple[tuple[str, str, str], ...]) -> bool:
    for name, op, value in matchers:
        if name not in labels:
            continue
        found = (
            re.fullmatch(value, labels[name]) is not None if "~" in op else labels[name] == value
        )
        if found == op.startswith("!"):
            return False
    return True


@cache
def _recorded() -> dict[str, list[tuple[dict[str, str], str]]]:
    found: dict[str, list[tuple[dict[str, str], str]]] = {}
    for rule in [*rank_rules(), *lifecycle_rules()]:
        if "record" in rule:
            found.setdefault(rule["record"], []).append((rule.get("labels", {}), rule["expr"]))
    return found


def slowest(expr: str, rules: dict[str, list[tuple[dict[str, str], str]]] | None = None) -> float:
    """The longest read interval of the exporter series `expr` reads, directly or through
    recording rules (only those whose labels its matchers select); 0 for none."""
    rules = _recorded() if rules is None else rules
    longest = 0.0
    for selector in selectors(expr):
        if selector.metric in rules:
            for labels, inner in rules[selector.metric]:
                if _matches(labels, selector.matchers):
                    longest = max(longest, slowest(inner, rules))
        else:
            longest = max(longest, series_interval(selector.metric) or 0.0)
    return longest


ALERTS = [
    r for r in [*alert_rules(), *rank_rules(), *lifecycle_rules()] if "alert" in r and "for" in r
]


@pytest.mark.parametrize(
    "rule", ALERTS, ids=[f"{r['alert']}-{r['for']}-{i}" for i, r in enumerate(ALERTS)]
)
def test_each_alert_waits_for_two_readings_of_what_it_reads(rule: dict[str, Any]) -> None:
    interval = slowest(rule["expr"])
    assert seconds(rule["for"]) >= interval + MARGIN, (rule["alert"], interval)


def test_the_check_sees_a_slow_series_through_a_recording_rule() -> None:
    rules = {
        "training_pod:x:score": [
            ({"signal": "fast"}, "training_pod_gpu_utilization_ratio"),
            ({"signal": "slow"}, "training_pod_gpu_temperature_celsius"),
        ]
    }
    assert slowest('training_pod:x:score{signal="fast"}', rules) == POLL
    assert slowest('training_pod:x:score{signal=~"fast|slow"}', rules) == 15 * POLL
    assert slowest("training_pod_restarts > 0", rules) == 5 * POLL
    assert slowest("training_exporter_up == 0", rules) == 0.0
