"""deploy/grafana/training-jobs.json: loads through grafana-foundation-sdk, every query is
valid PromQL to Prometheus's parser, and it covers what the issue asks for."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from deploy_helpers import (
    DASHBOARD,
    PanelQuery,
    all_panels,
    contract_problems,
    dashboard_json,
    load_generator,
    panel_queries,
    promtool_check_exprs,
    recorded_labels,
    regex_value,
    selectors,
    substitute,
    variable_queries,
)
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import prometheus
from grafana_foundation_sdk.models.dashboard import (
    Dashboard,
    Panel,
    RowPanel,
    VariableHide,
    VariableRefresh,
    VariableSort,
    VariableType,
)

from exporter.metrics import SPEC_BY_NAME

ALL = {"provider": ".*", "resource_pool": ".*", "job": ".*"}
ONE = {"provider": "aihc", "resource_pool": "cce-1uji3ib5", "job": regex_value("job-a.b")}


@pytest.fixture(scope="module")
def dashboard() -> Dashboard:
    # Without the plugins every query would load as an untyped UnknownDataquery.
    register_default_plugins()
    return Dashboard.from_json(dashboard_json())


def _panels(dashboard: Dashboard) -> list[Panel]:
    found: list[Panel] = []
    for panel in dashboard.panels or []:
        if isinstance(panel, RowPanel):
            found += [p for p in panel.panels or [] if isinstance(p, Panel)]
        elif isinstance(panel, Panel):
            found.append(panel)
    return found


def test_loads_through_the_foundation_sdk(dashboard: Dashboard) -> None:
    assert dashboard.uid == "training-jobs" and dashboard.title
    panels = _panels(dashboard)
    assert len(panels) == len(panel_queries_by_panel())
    assert any(isinstance(p, RowPanel) for p in dashboard.panels or [])
    for panel in panels:
        assert panel.datasource is not None and panel.datasource.type_val == "prometheus"
        assert panel.targets, panel.title
        for target in panel.targets:
            assert isinstance(target, prometheus.Dataquery), panel.title
            assert target.expr and target.ref_id


def panel_queries_by_panel() -> dict[str, list[PanelQuery]]:
    grouped: dict[str, list[PanelQuery]] = {}
    for query in panel_queries(dashboard_json()):
        grouped.setdefault(query.panel, []).append(query)
    return grouped


def test_variables_come_from_the_info_series(dashboard: Dashboard) -> None:
    variables = {v.name: v for v in dashboard.templating.list_val or []}
    assert {"datasource", "provider", "resource_pool", "job"} <= set(variables)
    for variable in variables.values():
        VariableType(variable.type_val)
        VariableHide(variable.hide)
        if variable.refresh is not None:
            VariableRefresh(variable.refresh)
        if variable.sort is not None:
            VariableSort(variable.sort)
    queries = {q.name: q for q in variable_queries(dashboard_json())}
    assert {q.label for q in queries.values()} == {"provider", "resource_pool", "job_id"}
    for name, query in queries.items():
        (selector,) = selectors(substitute(query.selector, ALL))
        # training_job_info, and training_pod_info for jobs listed without info (Alaya).
        assert selector.value_of("__name__") == "training_job_info|training_pod_info"
        # "All" must match the empty resource_pool of Alaya series, and jobs that appear later.
        assert variables[name].include_all and variables[name].all_value == ".*"


def test_panels_and_ids_are_unique_and_on_the_grid() -> None:
    panels = all_panels(dashboard_json())
    assert len({p["id"] for p in panels}) == len(panels)
    titles = [p["title"] for p in panels if p["type"] != "row"]
    assert len(set(titles)) == len(titles)
    # What shows at first, then each collapsed row opened alone: nothing overlaps.
    views = [dashboard_json()["panels"]]
    for row in dashboard_json()["panels"]:
        if row["type"] == "row" and row["collapsed"]:
            below = [
                p for p in dashboard_json()["panels"] if p["gridPos"]["y"] > row["gridPos"]["y"]
            ]
            height = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in row["panels"])
            height -= row["gridPos"]["y"] + 1
            moved = [
                {**p, "gridPos": {**p["gridPos"], "y": p["gridPos"]["y"] + height}} for p in below
            ]
            above = [
                p for p in dashboard_json()["panels"] if p["gridPos"]["y"] <= row["gridPos"]["y"]
            ]
            views.append([*above, *row["panels"], *moved])
    for view in views:
        _no_overlap(view)


def _no_overlap(panels: list[dict[str, Any]]) -> None:
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        area = set(
            itertools.product(
                range(pos["x"], pos["x"] + pos["w"]), range(pos["y"], pos["y"] + pos["h"])
            )
        )
        assert not area & cells, f"{panel['title']} overlaps another panel"
        cells |= area


@pytest.mark.parametrize("values", [ALL, ONE], ids=["all", "one-value"])
def test_every_query_is_valid_promql(values: dict[str, str], tmp_path: Path) -> None:
    named = [(q.name, substitute(q.expr, values)) for q in panel_queries(dashboard_json())]
    named += [
        (f"variable {q.name}", substitute(q.selector, values))
        for q in variable_queries(dashboard_json())
    ]
    assert promtool_check_exprs(named, tmp_path) == ""


def test_promql_check_can_fail(tmp_path: Path) -> None:
    complaint = promtool_check_exprs([("bad", "sum by (x) (rate(y[5m])")], tmp_path)
    assert "bad" in complaint


@pytest.mark.parametrize("query", panel_queries(dashboard_json()), ids=lambda q: q.name)
def test_query_names_only_what_the_exporter_exposes(query: PanelQuery) -> None:
    assert contract_problems(substitute(query.expr, ALL)) == []


@pytest.mark.parametrize("query", panel_queries(dashboard_json()), ids=lambda q: q.name)
def test_query_follows_the_variables(query: PanelQuery) -> None:
    """Job and pod series are filtered by all three variables, exporter series by provider."""
    for selector in selectors(substitute(query.expr, ALL)):
        labels = recorded_labels(selector.metric)
        if labels is None:
            spec = (
                SPEC_BY_NAME.get(selector.metric)
                or SPEC_BY_NAME[selector.metric.removesuffix("_bucket")]
            )
            labels = frozenset(spec.labels)
        wanted = {"provider"} | ({"resource_pool", "job_id"} & labels)
        filtered = {name for name, op, value in selector.matchers if op == "=~"}
        assert wanted <= filtered, f"{selector.metric} ignores {wanted - filtered}"


def test_covers_the_issue_s_panels() -> None:
    used = {
        s.metric
        for q in panel_queries(dashboard_json())
        for s in selectors(substitute(q.expr, ALL))
    }
    wanted = {
        "training_job_status",
        "training_pod_gpu_utilization_ratio",
        "training_pod_gpu_memory_utilization_ratio",
        "training_pod_gpu_tensor_pipe_active_ratio",
        "training_pod_gpu_power_watts",
        "training_pod_gpu_temperature_celsius",
        "training_pod_rdma_transmit_bytes_per_second",
        "training_pod_rdma_receive_bytes_per_second",
        "training_pod_nvlink_transmit_bytes_per_second",
        "training_pod_nvlink_receive_bytes_per_second",
        "training_pod_pcie_transmit_bytes_per_second",
        "training_pod_pcie_receive_bytes_per_second",
        "training_pod_rdma_transmit_errors_per_second",
        "training_pod_rdma_receive_errors_per_second",
        "training_pod_rdma_healthy",
        "training_pod_cpu_utilization_ratio",
        "training_pod_memory_utilization_ratio",
        "training_job_events_total",
        "training_exporter_up",
        "training_exporter_last_success_timestamp_seconds",
        "training_exporter_budget_required_requests_per_second",
        "training_exporter_budget_requests_per_second",
        "training_exporter_tier_interval_seconds",
        "training_exporter_discovery_errors_total",
        "training_exporter_duplicate_series",
    }
    assert wanted <= used, f"no panel for {sorted(wanted - used)}"
    warning_events = [
        s
        for q in panel_queries(dashboard_json())
        for s in selectors(substitute(q.expr, ALL))
        if s.metric == "training_job_events_total"
    ]
    assert all(s.value_of("event_type") == "Warning" for s in warning_events)


def test_units_suit_the_metrics() -> None:
    units: dict[str, Any] = {}
    for panel in all_panels(dashboard_json()):
        if panel["type"] == "row":
            continue
        for target in panel["targets"]:
            for selector in selectors(substitute(target["expr"], ALL)):
                units.setdefault(selector.metric, set()).add(
                    panel["fieldConfig"]["defaults"]["unit"]
                )
    for metric, unit in units.items():
        if metric.endswith("_ratio"):
            assert unit == {"percentunit"}, metric
        elif metric.endswith("_bytes_per_second"):
            assert unit == {"Bps"}, metric


def test_file_is_what_the_generator_writes() -> None:
    generate = load_generator()
    assert DASHBOARD in generate.rendered_files()
    assert generate.out_of_date() == [], "run: python deploy/generate.py"


def test_exporter_row_shows_the_plan() -> None:
    """Required vs budget on one panel (same target legend), tier intervals by tier."""
    panels = all_panels(dashboard_json())
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == "Exporter")
    row = [p for p in panels[start + 1 :] if p["type"] != "row"]
    by_metric: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for panel in row:
        for target in panel["targets"]:
            for selector in selectors(substitute(target["expr"], ALL)):
                by_metric.setdefault(selector.metric, []).append((panel["title"], target))
    ((required_panel, required),) = by_metric[
        "training_exporter_budget_required_requests_per_second"
    ]
    ((budget_panel, budget),) = by_metric["training_exporter_budget_requests_per_second"]
    assert required_panel == budget_panel
    for target in (required, budget):
        assert "by (provider, target)" in target["expr"]
        assert target["legendFormat"].startswith("{{provider}}/{{target}}")
    ((_, tiers),) = by_metric["training_exporter_tier_interval_seconds"]
    assert "by (provider, target, tier)" in tiers["expr"] and "{{tier}}" in tiers["legendFormat"]


def _row(title: str) -> list[dict[str, Any]]:
    panels = all_panels(dashboard_json())
    start = next(i for i, p in enumerate(panels) if p["type"] == "row" and p["title"] == title)
    end = next(
        (i for i, p in enumerate(panels[start + 1 :], start + 1) if p["type"] == "row"),
        len(panels),
    )
    return panels[start + 1 : end]


def test_the_ranks_row_is_collapsed_so_opening_the_dashboard_loads_no_score() -> None:
    """With every job chosen the row would load every pod's scores: 28k-112k series at 250
    jobs. Closed, its queries run only when it is opened; nothing outside it reads scores."""
    (ranks,) = [p for p in dashboard_json()["panels"] if p["title"] == "Ranks (choose one job)"]
    assert ranks["collapsed"] and len(ranks["panels"]) == 2 + len(
        load_generator().rank_rules.SIGNALS
    )
    shown = [p for p in dashboard_json()["panels"] if p["type"] != "row"]
    scored = ("training_pod:robust_score", ":ranked", ":median", ":spread")
    assert not [
        p["title"] for p in shown for t in p["targets"] if any(s in t["expr"] for s in scored)
    ]


def test_ranks_row_shows_every_signal_against_its_band_and_marks_outliers() -> None:
    rank_rules = load_generator().rank_rules
    row = _row("Ranks (choose one job)")
    used = {
        s.metric for p in row for t in p["targets"] for s in selectors(substitute(t["expr"], ALL))
    }
    for signal in rank_rules.SIGNALS:
        assert {
            f"training_pod:{signal.short}:ranked",
            f"training_job:{signal.short}:median",
            f"training_job:{signal.short}:spread",
        } <= used, signal.name
    (outliers,) = [p for p in row if p["title"] == "Outliers now"]
    steps = outliers["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert [s["value"] for s in steps] == [None, -rank_rules.K, rank_rules.K]
    assert f"> {rank_rules.number(rank_rules.K)}" in outliers["targets"][0]["expr"]


def test_idle_gpu_hours_row_ranks_jobs_and_sums_queues_and_pools() -> None:
    row = _row("Idle GPU-hours")
    exprs = [t["expr"] for p in row for t in p["targets"]]
    assert any(e.startswith("topk(10, ") and "training_job:gpus_idle:count" in e for e in exprs)
    for level in ("queue", "resource_pool"):
        assert any(f"training_{level}:gpus_idle:count" in e for e in exprs), level


def test_lifecycle_row_shows_queue_waits_failures_by_class_and_gpu_hours_lost() -> None:
    row = _row("Lifecycle")
    used = {
        s.metric for p in row for t in p["targets"] for s in selectors(substitute(t["expr"], ALL))
    }
    assert {
        "training_queue:queue_wait_seconds:quantile",
        "training_job:queue_wait_seconds:waiting",
        "training_queue:jobs_failed:count",
        "training_job_failure_class",
        "training_job:gpu_hours_failed:total",
        "training_job:gpu_hours_restarting:total",
        "training_queue:gpu_hours_failed:24h",
        "training_queue:gpu_hours_restarting:24h",
    } <= used
    (by_class,) = [p for p in row if p["title"] == "Failures by class"]
    assert "by (class)" in by_class["targets"][0]["expr"]
    assert not [
        p for p in dashboard_json()["panels"] if p["title"] == "Lifecycle" and p["collapsed"]
    ]
