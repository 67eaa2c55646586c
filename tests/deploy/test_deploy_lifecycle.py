"""deploy/prometheus/lifecycle.yaml: promtool accepts it, its unit tests pass, cover every rule
and notice each constant changing, and it names only what the exporter exposes or records."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from deploy_helpers import (
    LIFECYCLE,
    LIFECYCLE_TESTS,
    contract_problems,
    lifecycle_rules,
    load_generator,
    run_promtool,
    selectors,
)

RECORDED_PREFIXES = ("training_job:", "training_queue:", "training_resource_pool:")


@pytest.fixture(scope="module")
def lifecycle() -> ModuleType:
    module: ModuleType = load_generator().lifecycle_rules
    return module


def promtool_test(rules_text: str, tests: dict[str, Any], tmp_path: Path) -> str:
    """Run `tests` against `rules_text`; promtool's output, empty when it passed."""
    (tmp_path / LIFECYCLE.name).write_text(rules_text, encoding="utf-8")
    (tmp_path / LIFECYCLE_TESTS.name).write_text(yaml.safe_dump(tests), encoding="utf-8")
    result = run_promtool("test", "rules", LIFECYCLE_TESTS.name, cwd=tmp_path)
    return "" if result.returncode == 0 else result.stdout + result.stderr


def unit_tests(*names: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(LIFECYCLE_TESTS.read_text(encoding="utf-8"))
    data["tests"] = [t for t in data["tests"] if any(n in t["name"] for n in names)]
    assert data["tests"], names
    return data


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
    for test in yaml.safe_load(LIFECYCLE_TESTS.read_text(encoding="utf-8"))["tests"]:
        for case in test.get("alert_rule_test", []):
            cases[case["alertname"]].add(bool(case.get("exp_alerts")))
    alerts = {rule["alert"] for rule in lifecycle_rules() if "alert" in rule}
    assert alerts == {"TrainingJobPendingTooLong", "TrainingJobRestartLoop", "TrainingFailureBurst"}
    assert dict(cases) == {name: {True, False} for name in alerts}


def test_every_recording_rule_has_an_expected_value() -> None:
    tested = " ".join(
        case["expr"]
        for test in yaml.safe_load(LIFECYCLE_TESTS.read_text(encoding="utf-8"))["tests"]
        for case in test.get("promql_expr_test", [])
    )
    untested = {r["record"] for r in lifecycle_rules() if "record" in r} - set(
        re.findall(r"[a-z_]+:[a-z_0-9]+:[a-z_0-9]+", tested)
    )
    assert untested == set()


@pytest.mark.parametrize(
    "rule",
    lifecycle_rules(),
    ids=lambda r: str(r.get("alert") or r["record"]) + str(r.get("labels")),
)
def test_rule_names_only_what_the_exporter_exposes_or_records(rule: dict[str, Any]) -> None:
    recorded = {r["record"] for r in lifecycle_rules() if "record" in r}
    for selector in selectors(str(rule["expr"])):
        if selector.metric.startswith(RECORDED_PREFIXES):
            assert selector.metric in recorded, selector.metric
    assert contract_problems(str(rule["expr"])) == []


@pytest.mark.parametrize(
    "rule", [r for r in lifecycle_rules() if "alert" in r], ids=lambda r: r["alert"]
)
def test_alert_has_severity_summary_description_and_runbook(rule: dict[str, Any]) -> None:
    assert rule["labels"]["severity"] in {"warning", "critical"}
    assert {"summary", "description", "runbook"} <= set(rule["annotations"])


def test_a_test_timescale_changes_only_durations(lifecycle: ModuleType) -> None:
    production, quick = lifecycle.rules(), lifecycle.rules(lifecycle.PRODUCTION.scaled(1 / 60))

    def shape(rules: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (r.get("record"), r.get("alert"), r.get("labels"), "for" in r)
            for g in rules["groups"]
            for r in g["rules"]
        ]

    assert shape(production) == shape(quick)
    assert yaml.safe_load(LIFECYCLE.read_text(encoding="utf-8")) == production
