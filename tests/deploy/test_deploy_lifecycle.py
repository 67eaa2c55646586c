"""deploy/prometheus/lifecycle.yaml: promtool accepts it, its unit tests pass, cover every rule
and notice each constant changing (test_deploy_ranks.py checks that its rules name only what
the exporter exposes or records, and that its alerts carry a runbook)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from deploy_helpers import (
    LIFECYCLE,
    LIFECYCLE_TESTS,
    deploy_yaml,
    lifecycle_rules,
    load_generator,
    promtool_unit_tests,
    rule_shape,
    run_promtool,
    unit_tests_named,
)


@pytest.fixture(scope="module")
def lifecycle() -> ModuleType:
    module: ModuleType = load_generator().lifecycle_rules
    return module


def promtool_test(rules_text: str, tests: dict[str, Any], tmp_path: Path) -> str:
    return promtool_unit_tests(LIFECYCLE, rules_text, tests, tmp_path)


def unit_tests(*names: str) -> dict[str, Any]:
    return unit_tests_named(LIFECYCLE_TESTS, *names)


def test_promtool_check_rules_accepts_the_rules() -> None:
    result = run_promtool("check", "rules", str(LIFECYCLE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(lifecycle_rules())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    result = run_promtool("test", "rules", LIFECYCLE_TESTS.name, cwd=LIFECYCLE_TESTS.parent)
    assert result.returncode == 0, result.stdout + result.stderr


# Each constant of lifecycle_rules.py, changed: the unit tests must notice.
CHANGES: dict[str, tuple[str, Any, str, str]] = {
    "pending factor": ("PENDING_FACTOR", 10, "TrainingJobPendingTooLong", "pending too long"),
    "burst": ("BURST", 4, "TrainingFailureBurst", "a burst"),
    "no burst": ("NO_BURST", (), "TrainingFailureBurst", "a burst"),
    "loop restarts": ("LOOP_RESTARTS", 4, "TrainingJobRestartLoop", "loops"),
}


@pytest.mark.parametrize("name", CHANGES)
def test_unit_tests_notice_each_constant(
    lifecycle: ModuleType, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    attribute, value, culprit, test = CHANGES[name]
    monkeypatch.setattr(lifecycle, attribute, value)
    assert culprit in promtool_test(lifecycle.text(), unit_tests(test), tmp_path)


def test_unit_tests_notice_the_windows(lifecycle: ModuleType, tmp_path: Path) -> None:
    short = lifecycle.Timescale(wait_window=3000, burst_window=100, loop_window=600)
    failed = promtool_test(lifecycle.text(short), unit_tests("waits", "burst", "loops"), tmp_path)
    for rule in ("queue_wait_seconds:quantile", "jobs_failed:count", "restarts:count"):
        assert rule in failed


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    cases: dict[str, set[bool]] = defaultdict(set)
    for test in deploy_yaml(LIFECYCLE_TESTS)["tests"]:
        for case in test.get("alert_rule_test", []):
            cases[case["alertname"]].add(bool(case.get("exp_alerts")))
    alerts = {rule["alert"] for rule in lifecycle_rules() if "alert" in rule}
    assert alerts == {"TrainingJobPendingTooLong", "TrainingJobRestartLoop", "TrainingFailureBurst"}
    assert dict(cases) == {name: {True, False} for name in alerts}


def test_every_recording_rule_has_an_expected_value() -> None:
    tested = " ".join(
        case["expr"]
        for test in deploy_yaml(LIFECYCLE_TESTS)["tests"]
        for case in test.get("promql_expr_test", [])
    )
    untested = {r["record"] for r in lifecycle_rules() if "record" in r} - set(
        re.findall(r"[a-z_]+:[a-z_0-9]+:[a-z_0-9]+", tested)
    )
    assert untested == set()


def test_a_test_timescale_changes_only_durations(lifecycle: ModuleType) -> None:
    production, quick = lifecycle.rules(), lifecycle.rules(lifecycle.PRODUCTION.scaled(1 / 60))
    assert rule_shape(production) == rule_shape(quick)
    assert deploy_yaml(LIFECYCLE) == production
