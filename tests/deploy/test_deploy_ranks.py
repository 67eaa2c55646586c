"""deploy/prometheus/ranks.yaml: promtool accepts it, its unit tests pass, cover every rule and
notice each constant changing, every signal's ranks match a median and MAD computed here, and
it names only what the exporter exposes."""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from deploy_helpers import (
    RANK_TESTS,
    RANKS,
    alert_rules,
    contract_problems,
    deploy_yaml,
    lifecycle_rules,
    load_generator,
    promtool_unit_tests,
    rank_rules,
    rule_shape,
    run_promtool,
    seconds,
    selectors,
    unit_tests_named,
)

from exporter.config import DEFAULT_PORT

RECORDED_PREFIXES = ("training_pod:", "training_job:", "training_queue:", "training_resource_pool:")


@pytest.fixture(scope="module")
def ranks() -> ModuleType:
    module: ModuleType = load_generator().rank_rules
    return module


def promtool_test(rules_text: str, tests: dict[str, Any], tmp_path: Path) -> str:
    return promtool_unit_tests(RANKS, rules_text, tests, tmp_path)


def test_promtool_check_rules_accepts_the_rules() -> None:
    result = run_promtool("check", "rules", str(RANKS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rank_rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = run_promtool("test", "rules", RANK_TESTS.name, cwd=RANK_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr


def unit_tests(*names: str, until: str | None = None) -> dict[str, Any]:
    """ranks_test.yaml's tests whose name holds one of `names`; with `until`, only their
    checks at that eval_time or before. promtool evaluates every rule at every step up to a
    test's last check, so a change that the early checks catch needs none of the later steps
    (the hung test's checks of a hung job are at 19m-21m, of an idle one at 29m-31m, its last
    at 51m)."""
    data = unit_tests_named(RANK_TESTS, *names)
    if until is not None:
        for test in data["tests"]:
            for kind in ("alert_rule_test", "promql_expr_test"):
                cases = test.get(kind, [])
                test[kind] = [c for c in cases if seconds(c["eval_time"]) <= seconds(until)]
    return data


SLOW_RANK, THERMAL, HUNG, GPU_HOURS, DIP, ONE_READING = (
    "a slow rank fires",
    "a card hotter",
    "is hung",
    "GPU-hours",
    "outlasts a two-minute dip",
    "one slow-tier reading",
)


def _signal_floors(ranks: ModuleType, **changes: float) -> tuple[Any, ...]:
    return tuple(dataclasses.replace(s, **changes) for s in ranks.SIGNALS)


# Each constant of rank_rules.py, changed: the unit tests must notice (and name what broke),
# by their checks until the eval_time given: the slow-rank test's checks of a slow rank firing
# start at 11m, of its scores and spreads at 1m; the hung test's (`unit_tests`) at 21m and 31m.
CHANGES: dict[str, tuple[str, Any, str, str, str]] = {
    "k": ("K", 7.0, "TrainingRankSlow", SLOW_RANK, "11m"),
    "mad scale": ("MAD_SCALE", 1.0, "robust_score", SLOW_RANK, "1m"),
    "hung utilisation": ("HUNG_UTILIZATION", 0.0005, "TrainingJobHung", HUNG, "21m"),
    "hung rdma": ("HUNG_RDMA_BYTES_PER_SECOND", 500.0, "TrainingJobHung", HUNG, "21m"),
    "idle utilisation": ("IDLE_UTILIZATION", 0.03, "TrainingJobIdle", HUNG, "31m"),
    "mad floor": ("SIGNALS", {"floor": 1e-9}, "TrainingRankSlow", SLOW_RANK, "11m"),
    "relative mad floor": ("SIGNALS", {"relative_floor": 0.0}, "spread", SLOW_RANK, "1m"),
}


@pytest.mark.parametrize("name", CHANGES)
def test_unit_tests_notice_each_constant(
    ranks: ModuleType, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attribute, value, culprit, test, until = CHANGES[name]
    if attribute == "SIGNALS":
        value = _signal_floors(ranks, **value)
    monkeypatch.setattr(ranks, attribute, value)
    assert culprit in promtool_test(ranks.text(), unit_tests(test, until=until), tmp_path)


def test_unit_tests_notice_no_keep_firing_for(ranks: ModuleType, tmp_path: Path) -> None:
    """Without it a slow rank resolves at a checkpoint's dip and fires again after."""
    plain = dataclasses.replace(ranks.PRODUCTION, keep_firing=0)
    assert DIP in promtool_test(ranks.text(plain), unit_tests(DIP), tmp_path)


def test_unit_tests_notice_a_shorter_for(ranks: ModuleType, tmp_path: Path) -> None:
    quick = dataclasses.replace(
        ranks.PRODUCTION, slow_for=300, hung_for=600, idle_for=900, slow_tier=300
    )
    tests = unit_tests(SLOW_RANK, THERMAL, HUNG, until="21m")
    failed = promtool_test(ranks.text(quick), tests, tmp_path)
    for alert in ("TrainingRankSlow", "TrainingGpuThermalOutlier", "TrainingJobHung"):
        assert alert in failed


def test_unit_tests_notice_a_for_that_does_not_wait_for_a_second_slow_reading(
    ranks: ModuleType, tmp_path: Path
) -> None:
    """Without the slow tier's reading interval in it, RDMA's slow rank fires on one read."""
    quick = dataclasses.replace(ranks.PRODUCTION, slow_tier=0, margin=0)
    failed = promtool_test(ranks.text(quick), unit_tests(ONE_READING), tmp_path)
    assert "TrainingRankLinkSlow" in failed


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    cases: dict[str, set[bool]] = defaultdict(set)
    for test in deploy_yaml(RANK_TESTS)["tests"]:
        for case in test.get("alert_rule_test", []):
            cases[case["alertname"]].add(bool(case.get("exp_alerts")))
    alerts = {rule["alert"] for rule in rank_rules() if "alert" in rule}
    assert alerts == {
        "TrainingRankSlow",
        "TrainingRankLinkSlow",
        "TrainingGpuThermalOutlier",
        "TrainingJobHung",
        "TrainingJobIdle",
    }
    assert {name: seen for name, seen in cases.items()} == {name: {True, False} for name in alerts}


def test_every_recording_rule_has_an_expected_value() -> None:
    """Named in a promql_expr_test of ranks_test.yaml, or of the per-signal test below."""
    tested = " ".join(
        case["expr"]
        for test in deploy_yaml(RANK_TESTS)["tests"]
        for case in test.get("promql_expr_test", [])
    )
    per_signal = (":ranked", ":median", ":mad", ":spread", "training_pod:robust_score")
    untested = {
        rule["record"]
        for rule in rank_rules()
        if "record" in rule
        and rule["record"] not in tested
        and not rule["record"].endswith(per_signal)
        and rule["record"] != "training_pod:robust_score"
    }
    assert untested == set()


def _round(value: float) -> float:
    """PromQL's round(value, 0.001)."""
    return math.floor(value * 1000 + 0.5) / 1000


def test_every_signal_ranks_like_a_median_and_mad_computed_here(
    ranks: ModuleType, tmp_path: Path
) -> None:
    """Four pods per signal, one far out; the expected values come from Python's statistics."""
    series: list[dict[str, str]] = []
    expected: list[dict[str, Any]] = []
    for index, signal in enumerate(ranks.SIGNALS):
        job = f"job-{signal.name}"
        base = signal.floor * 100 if signal.relative_floor == 0 else 1e9
        values = [base * f for f in (1.0, 1.02, 0.97, 0.5 + 0.1 * index)]
        ids = f'provider="aihc",resource_pool="p",queue="q",job_id="{job}"'
        for pod, value in enumerate(values):
            labels = f'{ids},pod="{pod}"'
            series.append(
                {"series": f'training_pod_phase{{{labels},phase="Running"}}', "values": "1x5"}
            )
            series.append({"series": f"{signal.metric}{{{labels}}}", "values": f"{value!r}x5"})
        median = statistics.median(values)
        mad = statistics.median(abs(v - median) for v in values)
        spread = max(mad, signal.relative_floor * abs(median), signal.floor)
        short = signal.short
        for name, value in (("median", median), ("mad", mad), ("spread", spread)):
            expected.append(
                {
                    "expr": f'round(training_job:{short}:{name}{{job_id="{job}"}}, 0.001)',
                    "eval_time": "1m",
                    "exp_samples": [{"labels": f"{{{ids}}}", "value": _round(value)}],
                }
            )
        expected.append(
            {
                "expr": f'round(training_pod:robust_score{{job_id="{job}"}}, 0.001)',
                "eval_time": "1m",
                "exp_samples": [
                    {
                        "labels": f'{{{ids},pod="{pod}",signal="{signal.name}"}}',
                        "value": _round(ranks.MAD_SCALE * (value - median) / spread),
                    }
                    for pod, value in enumerate(values)
                ],
            }
        )
        expected.append(
            {
                "expr": f'training_pod:{short}:ranked{{job_id="{job}",pod="3"}}',
                "eval_time": "1m",
                "exp_samples": [
                    {"labels": f'training_pod:{short}:ranked{{{ids},pod="3"}}', "value": values[3]}
                ],
            }
        )
    tests = {
        "rule_files": [RANKS.name],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": expected}],
    }
    assert promtool_test(ranks.text(), tests, tmp_path) == ""


@pytest.mark.parametrize(
    "rule",
    [*rank_rules(), *lifecycle_rules()],
    ids=lambda r: str(r.get("alert") or r["record"]) + str(r.get("labels")),
)
def test_rule_names_only_what_the_exporter_exposes_or_records(rule: dict[str, Any]) -> None:
    """Of ranks.yaml and lifecycle.yaml."""
    recorded = {r["record"] for r in [*rank_rules(), *lifecycle_rules()] if "record" in r}
    expr = str(rule["expr"])
    for selector in selectors(expr):
        if selector.metric.startswith(RECORDED_PREFIXES):
            assert selector.metric in recorded, selector.metric
    assert contract_problems(expr) == []


@pytest.mark.parametrize(
    "rule",
    [r for r in [*rank_rules(), *lifecycle_rules()] if "alert" in r],
    ids=lambda r: r["alert"],
)
def test_alert_has_severity_summary_description_and_runbook(rule: dict[str, Any]) -> None:
    assert rule["labels"]["severity"] in {"warning", "critical"}
    assert {"summary", "description", "runbook"} <= set(rule["annotations"])


def test_a_test_timescale_changes_only_durations(ranks: ModuleType) -> None:
    """The end-to-end test's rules are these rules: only `for`, intervals and windows differ."""
    production, quick = ranks.rules(), ranks.rules(ranks.PRODUCTION.scaled(1 / 60))
    assert [g["interval"] for g in quick["groups"]] == ["1s", "1s"]
    assert rule_shape(production) == rule_shape(quick)
    assert deploy_yaml(RANKS) == production


def test_durations_are_prometheus_durations(ranks: ModuleType) -> None:
    assert [ranks.duration(s) for s in (3600, 600, 3570, 1.5, 0.25)] == [
        "1h",
        "10m",
        "59m30s",
        "1s500ms",
        "250ms",
    ]


def test_readme_alert_section_lists_every_alert_with_threshold_and_first_check() -> None:
    readme = (RANKS.parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Alerts", 1)[1].split("\n### ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (.+) \| (.+) \| (.+) \|$", section, flags=re.M)
    alerts = [
        r["alert"] for r in [*alert_rules(), *rank_rules(), *lifecycle_rules()] if "alert" in r
    ]
    assert sorted(name for name, *_ in rows) == sorted(alerts)
    assert all(meaning and threshold and check for _, meaning, threshold, check in rows)


def test_the_demo_prometheus_config_loads_both_rule_files_and_scrapes_the_default_port() -> None:
    config = RANKS.parent / "demo.yaml"
    result = run_promtool("check", "config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    data = deploy_yaml(config)
    assert data["rule_files"] == ["alerts.yaml", RANKS.name, "lifecycle.yaml"]
    (scrape,) = data["scrape_configs"]
    assert scrape["static_configs"] == [{"targets": [f"localhost:{DEFAULT_PORT}"]}]
