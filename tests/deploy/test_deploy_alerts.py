"""deploy/prometheus/alerts.yaml: promtool accepts it, its unit tests pass and cover it, and it
only names metrics and labels the exporter exposes."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from deploy_helpers import (
    ALERT_TESTS,
    ALERTS,
    CHART,
    alert_rules,
    contract_problems,
    deploy_yaml,
    lifecycle_rules,
    promtool_unit_tests,
    rank_rules,
    run_promtool,
    selectors,
    threshold_operands,
    unit_tests_named,
)

from exporter.metrics import KNOWN_JOB_STATUSES, KNOWN_POD_PHASES


def test_promtool_check_rules_accepts_the_rules() -> None:
    result = run_promtool("check", "rules", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = run_promtool("test", "rules", ALERT_TESTS.name, cwd=ALERT_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    """The unit tests notice a changed threshold: they test the rules, not themselves. (The
    GPU-idle tests only, on the unchanged rules and on the changed ones.)"""
    rules = ALERTS.read_text(encoding="utf-8")
    assert rules.count("< 0.05") == 1
    changed = rules.replace("< 0.05", "< 0.001")
    tests = unit_tests_named(ALERT_TESTS, "idle GPUs")
    assert promtool_unit_tests(ALERTS, rules, tests, tmp_path) == ""
    assert "TrainingJobGpuIdle" in promtool_unit_tests(ALERTS, changed, tests, tmp_path)


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    cases: dict[str, set[bool]] = defaultdict(set)
    for test in deploy_yaml(ALERT_TESTS)["tests"]:
        for case in test.get("alert_rule_test", []):
            cases[case["alertname"]].add(bool(case.get("exp_alerts")))
    names = {rule["alert"] for rule in alert_rules()}
    assert set(cases) == names, "unit tests name alerts that do not exist, or miss some"
    missing = {name: {True, False} - seen for name, seen in cases.items() if seen != {True, False}}
    assert not missing, f"alerts without a firing (True) or a quiet (False) case: {missing}"


def test_the_issue_s_alerts_are_all_there() -> None:
    exprs = {rule["alert"]: rule["expr"] for rule in alert_rules()}
    metrics_by_alert = {name: {s.metric for s in selectors(e)} for name, e in exprs.items()}
    wanted = {
        "TrainingJobFailed": "training_job_status",
        "TrainingPodRestarting": "training_pod_restarts",
        "TrainingJobGpuIdle": "training_pod_gpu_utilization_ratio",
        "TrainingPodRdmaUnhealthy": "training_pod_rdma_healthy",
        "TrainingPodRdmaErrors": "training_pod_rdma_receive_errors_per_second",
        "TrainingExporterTargetDown": "training_exporter_up",
        "TrainingExporterDataStale": "training_exporter_last_success_timestamp_seconds",
        "TrainingPodMetricsStale": "training_pod_last_sample_timestamp_seconds",
        "TrainingExporterBudgetExceeded": "training_exporter_budget_requests_per_second",
    }
    for alert, metric in wanted.items():
        assert metric in metrics_by_alert.get(alert, set()), alert
    gpu_idle = next(r for r in alert_rules() if r["alert"] == "TrainingJobGpuIdle")
    assert gpu_idle["for"] == "30m" and "< 0.05" in gpu_idle["expr"]


def test_budget_alert_compares_the_plan_with_the_budget_and_says_what_to_do() -> None:
    rule = next(r for r in alert_rules() if r["alert"] == "TrainingExporterBudgetExceeded")
    assert " ".join(rule["expr"].split()) == (
        "training_exporter_budget_required_requests_per_second"
        " > training_exporter_budget_requests_per_second"
    )
    assert rule["for"] == "30m" and rule["labels"]["severity"] == "warning"
    description = rule["annotations"]["description"]
    # The config keys and flag a user can change, as exporter/config.py and the CLI spell them.
    for remedy in (
        "limits.requests_per_second",
        "tiers.move",
        "tiers.medium",
        "tiers.slow",
        "poll_interval",
        "metric_types",
        "--shard.count",
    ):
        assert remedy in description, remedy


def test_data_stale_follows_the_fast_tier() -> None:
    """A target whose rounds are 10 minutes apart is not stale after 15 minutes."""
    rule = next(r for r in alert_rules() if r["alert"] == "TrainingExporterDataStale")
    fast = [s for s in selectors(rule["expr"]) if s.value_of("tier") == "fast"]
    assert [s.metric for s in fast] == ["training_exporter_tier_interval_seconds"]


def test_threshold_operands_take_comparisons_apart() -> None:
    assert threshold_operands("time() - a > 900") == ["time() - a{}"]
    assert threshold_operands("0.05 > a") == ["a{}"]
    assert threshold_operands("a > b") == ["(a{}) > bool (b{})"]
    assert threshold_operands("a > bool on (x) group_left (y) b") == [
        "(a{}) > bool on (x) group_left (y) (b{})"
    ]
    assert threshold_operands("a and on (x) b") == []


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r["alert"])
def test_rule_names_only_what_the_exporter_exposes(rule: dict[str, object]) -> None:
    expr = str(rule["expr"])
    assert contract_problems(expr) == []
    for selector in selectors(expr):
        for label, known in (("status", KNOWN_JOB_STATUSES), ("phase", KNOWN_POD_PHASES)):
            value = selector.value_of(label)
            if value is not None:
                assert set(value.split("|")) <= set(known), f"{label}={value}"


@pytest.mark.parametrize("rule", alert_rules(), ids=lambda r: r["alert"])
def test_rule_has_severity_summary_and_description(rule: dict[str, object]) -> None:
    labels, annotations = rule["labels"], rule["annotations"]
    assert isinstance(labels, dict) and labels["severity"] in {"warning", "critical"}
    assert isinstance(annotations, dict) and {"summary", "description"} <= set(annotations)


def test_contract_check_can_fail() -> None:
    assert contract_problems('training_pod_info{event_type="x"}') == [
        "training_pod_info has no label event_type"
    ]
    assert contract_problems("training_job_stauts") != []
    assert contract_problems("sum by (jobid) (training_job_info)") == ["no metric has label jobid"]


def test_chart_readme_lists_exactly_the_alerts() -> None:
    readme = (CHART / "README.md").read_text(encoding="utf-8")
    listed = re.findall(r"^\| `(\w+)` \|", readme, flags=re.M)
    assert sorted(name for name in listed if name.startswith("Training")) == sorted(
        rule["alert"]
        for rule in [*alert_rules(), *rank_rules(), *lifecycle_rules()]
        if "alert" in rule
    )
