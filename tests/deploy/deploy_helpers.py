"""What the deploy tests share: paths, the real promtool, PromQL parsing, the metric contract.

PromQL is checked by the real Prometheus parser (`promtool check rules` on a generated rule
file). `promql_parser` (a separate parser) is used only to take expressions apart: to list
their selectors and the operands of their threshold comparisons.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import promql_parser
import pytest
import yaml

from exporter.metrics import SPEC_BY_NAME, SPECS, MetricSpec

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CHART = DEPLOY / "helm" / "training-job-exporter"
SIDECAR_EXAMPLE = DEPLOY / "helm" / "examples" / "sidecar-host"
ALERTS = DEPLOY / "prometheus" / "alerts.yaml"
ALERT_TESTS = DEPLOY / "prometheus" / "alerts_test.yaml"
RANKS = DEPLOY / "prometheus" / "ranks.yaml"
RANK_TESTS = DEPLOY / "prometheus" / "ranks_test.yaml"
LIFECYCLE = DEPLOY / "prometheus" / "lifecycle.yaml"
LIFECYCLE_TESTS = DEPLOY / "prometheus" / "lifecycle_test.yaml"
DASHBOARD = DEPLOY / "grafana" / "training-jobs.json"

COMPARISONS = frozenset({"==", "!=", ">", "<", ">=", "<="})
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")
# Labels Prometheus adds at scrape time; rules may keep or group by them.
SCRAPE_LABELS = frozenset({"instance", "job"})


def tool(name: str) -> str:
    """The path of a Debian tool the tests need; CI installs the `prometheus` package."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found on PATH: install Debian's prometheus package")
    return path


def seconds(text: str) -> float:
    """A Prometheus duration (`1h30m`, `1s500ms`, a promtool test's `eval_time`) in seconds."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", text)
    assert "".join(n + u for n, u in parts) == text, text
    return sum(int(n) * units[u] for n, u in parts)


def go_tool_env() -> dict[str, str]:
    """The environment for promtool and Prometheus: Go's collector runs when the heap has grown
    4-fold (GOGC=400), not 2-fold. Their heaps here are tens of MB, and collecting them at
    every doubling took a sixth to a fifth of their CPU; what they compute is the same."""
    return {**os.environ, "GOGC": "400"}


def run_promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=go_tool_env(),
    )


def load_generator() -> ModuleType:
    """deploy/generate.py, which writes the dashboard and the chart's copies of both files."""
    spec = importlib.util.spec_from_file_location("deploy_generate", DEPLOY / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# libyaml's parser and emitter with PyYAML's safe constructor and representer: what
# yaml.safe_load builds and yaml.safe_dump writes, in a tenth of the time (the chart's rendered
# rules and dashboard, the promtool test files: tenths of a second each in pure Python).
_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def yaml_load(text: str) -> Any:
    """`yaml.safe_load`, with libyaml when PyYAML has it."""
    return yaml.load(text, Loader=_LOADER)


def yaml_load_all(text: str) -> Iterator[Any]:
    """`yaml.safe_load_all`, with libyaml when PyYAML has it."""
    return yaml.load_all(text, Loader=_LOADER)


def yaml_dump(data: Any) -> str:
    """`yaml.safe_dump(data, sort_keys=False)`, with libyaml when PyYAML has it."""
    return str(yaml.dump(data, Dumper=_DUMPER, sort_keys=False))


@functools.cache
def _parsed(path: Path) -> Any:
    """A YAML file under deploy/, read once a process: the contract checks ask for the rules
    once per selector of every query (hundreds of times a module). The tests never write
    these files."""
    return yaml_load(path.read_text(encoding="utf-8"))


def deploy_yaml(path: Path) -> dict[str, Any]:
    """A YAML file under deploy/ (parsed once a process), as a copy the caller may change."""
    data: dict[str, Any] = copy.deepcopy(_parsed(path))
    return data


def _rules_of(path: Path) -> list[dict[str, Any]]:
    """The rules of a rule file, not to be changed."""
    return [rule for group in _parsed(path)["groups"] for rule in group["rules"]]


def _rules(path: Path) -> list[dict[str, Any]]:
    """The rules of a rule file, a copy the caller may change."""
    return copy.deepcopy(_rules_of(path))


def alert_rules() -> list[dict[str, Any]]:
    return _rules(ALERTS)


def rank_rules() -> list[dict[str, Any]]:
    """The rules of ranks.yaml, recording and alerting, in order."""
    return _rules(RANKS)


def lifecycle_rules() -> list[dict[str, Any]]:
    """The rules of lifecycle.yaml, recording and alerting, in order."""
    return _rules(LIFECYCLE)


def dashboard_json() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


@dataclass(frozen=True)
class PanelQuery:
    panel: str
    ref: str
    expr: str

    @property
    def name(self) -> str:
        return f"{self.panel} [{self.ref}]"


def all_panels(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every panel in order, rows included, a collapsed row's panels right after it."""
    found: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        found.append(panel)
        found += panel.get("panels", []) if panel["type"] == "row" else []
    return found


def panel_queries(dashboard: Mapping[str, Any]) -> list[PanelQuery]:
    return [
        PanelQuery(panel["title"], target["refId"], target["expr"])
        for panel in all_panels(dashboard)
        if panel["type"] != "row"
        for target in panel["targets"]
    ]


@dataclass(frozen=True)
class VariableQuery:
    """A Grafana `label_values(selector, label)` variable."""

    name: str
    selector: str
    label: str


_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*(?P<label>\w+)\)$")


def variable_queries(dashboard: Mapping[str, Any]) -> list[VariableQuery]:
    found = []
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = _LABEL_VALUES.match(variable["query"]["query"])
        assert match, f"variable {variable['name']}: not a label_values() query"
        found.append(VariableQuery(variable["name"], match["selector"], match["label"]))
    return found


_VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")


def substitute(expr: str, values: Mapping[str, str], rate_interval: str = "5m") -> str:
    """`expr` as Grafana sends it: variables replaced, `$__rate_interval` and friends too."""
    builtins = {
        "__rate_interval": rate_interval,
        "__interval": rate_interval,
        "__range": "1h",
        "__range_s": "3600",
    }

    def replace(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        if name in builtins:
            return builtins[name]
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr}")
        return values[name]

    return _VARIABLE.sub(replace, expr)


def regex_value(value: str) -> str:
    """One variable value as Grafana puts it into a `=~` matcher: regex-escaped."""
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", value)


# --- taking PromQL apart ------------------------------------------------------------------

_MATCH_OPS = {
    "MatchOp.Equal": "=",
    "MatchOp.NotEqual": "!=",
    "MatchOp.Re": "=~",
    "MatchOp.NotRe": "!~",
}


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple[tuple[str, str, str], ...]

    def promql(self) -> str:
        inner = ", ".join(f"{n}{op}{json.dumps(v)}" for n, op, v in self.matchers)
        return f"{self.metric}{{{inner}}}"

    def value_of(self, label: str) -> str | None:
        return next((v for n, _, v in self.matchers if n == label), None)


def _nodes(expr: str) -> Iterator[Any]:
    found: list[Any] = []
    promql_parser.walk(promql_parser.parse(expr), lambda node, *_: found.append(node), None)
    return iter(found)


def selectors(expr: str) -> list[Selector]:
    """Every vector selector in `expr`, without offset or @ (as an instant selector)."""
    result = []
    for node in _nodes(expr):
        if isinstance(node, promql_parser.VectorSelector):
            matchers = tuple(
                (m.name, _MATCH_OPS[str(m.op)], m.value) for m in node.matchers.matchers
            )
            result.append(Selector(node.name or "", matchers))
    return result


def _unwrap(node: Any) -> Any:
    while isinstance(node, promql_parser.ParenExpr):
        node = node.expr
    return node


def threshold_operands(expr: str) -> list[str]:
    """For each comparison, PromQL that returns series whenever only the threshold decides it:
    the other side of a comparison with a number (`x` of `x > 0.05`), or, between two vectors
    (`required > budget`), the comparison with `bool`: series only where both sides match."""
    operands = []
    for node in _nodes(expr):
        if not isinstance(node, promql_parser.BinaryExpr) or str(node.op) not in COMPARISONS:
            continue
        lhs, rhs = _unwrap(node.lhs), _unwrap(node.rhs)
        lhs_number = isinstance(lhs, promql_parser.NumberLiteral)
        rhs_number = isinstance(rhs, promql_parser.NumberLiteral)
        if rhs_number and not lhs_number:
            operands.append(str(lhs))
        elif lhs_number and not rhs_number:
            operands.append(str(rhs))
        elif not lhs_number:
            modifier = str(node.modifier or "").removeprefix("bool").strip()
            parts = (f"({lhs})", str(node.op), "bool", modifier, f"({rhs})")
            operands.append(" ".join(part for part in parts if part))
    return operands


def grouping_labels(expr: str) -> set[str]:
    """Labels named in `by (...)`, `without (...)`, `on (...)`, `ignoring (...)`, `group_*`."""
    labels: set[str] = set()
    for node in _nodes(expr):
        modifier = getattr(node, "modifier", None)
        if modifier is None:
            continue
        if isinstance(node, promql_parser.AggregateExpr):
            labels.update(modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr):
            if modifier.matching is not None:
                labels.update(modifier.matching.labels)
            labels.update(modifier.group_labels or ())
    return labels


# --- the metric contract --------------------------------------------------------------------

ALL_LABELS = frozenset(
    {label for spec in SPECS for label in spec.labels} | {"gpu", "le"} | SCRAPE_LABELS
)


def spec_for(metric: str) -> tuple[MetricSpec, str]:
    """The contract's spec of a sample name, and the histogram suffix it carries ('' if none)."""
    if metric in SPEC_BY_NAME:
        return SPEC_BY_NAME[metric], ""
    for suffix in HISTOGRAM_SUFFIXES:
        base = metric.removesuffix(suffix)
        if (
            base != metric
            and SPEC_BY_NAME.get(base, None)
            and (SPEC_BY_NAME[base].kind == "histogram")
        ):
            return SPEC_BY_NAME[base], suffix
    raise LookupError(f"{metric} is not in the metric contract (exporter/metrics.py)")


# The labels of ranks.yaml's recorded series, by the level their name starts with.
_RECORDED_LEVELS = {
    "training_pod": frozenset(
        {"provider", "resource_pool", "queue", "job_id", "pod", "gpu", "replica_type"}
    ),
    "training_job": frozenset({"provider", "resource_pool", "queue", "job_id", "replica_type"}),
    "training_queue": frozenset({"provider", "resource_pool", "queue"}),
    "training_resource_pool": frozenset({"provider", "resource_pool"}),
    "training_provider": frozenset({"provider"}),
}


# Labels a recorded series keeps beyond its level's, by its name.
_RECORDED_EXTRA = {"training_queue:jobs_failed:count": frozenset({"class"})}


def recorded_labels(metric: str) -> frozenset[str] | None:
    """The labels of a series ranks.yaml or lifecycle.yaml records (their level's, and the
    rules' own `labels`, like `signal` on scores), None for any other."""
    rules = [r for r in (*_rules_of(RANKS), *_rules_of(LIFECYCLE)) if r.get("record") == metric]
    if not rules:
        return None
    labels = _RECORDED_LEVELS[metric.split(":", 1)[0]] | _RECORDED_EXTRA.get(metric, frozenset())
    return labels.union(*(r.get("labels", {}) for r in rules))


def contract_problems(expr: str) -> list[str]:
    """Names and labels of `expr` that neither the exporter nor ranks.yaml exposes, one line
    each."""
    problems = []
    for selector in selectors(expr):
        recorded = recorded_labels(selector.metric)
        if recorded is not None:
            problems += [
                f"{selector.metric} has no label {name}"
                for name, _, _ in selector.matchers
                if name not in recorded | SCRAPE_LABELS
            ]
            continue
        try:
            spec, suffix = spec_for(selector.metric)
        except LookupError as exc:
            problems.append(str(exc))
            continue
        allowed = set(spec.labels) | SCRAPE_LABELS
        if spec.per_card:
            allowed.add("gpu")
        if suffix == "_bucket":
            allowed.add("le")
        problems += [
            f"{selector.metric} has no label {name}"
            for name, _, _ in selector.matchers
            if name not in allowed
        ]
    known = ALL_LABELS | {"signal", "quantile", "seen_in"}
    problems += [f"no metric has label {label}" for label in grouping_labels(expr) - known]
    return problems


def promtool_unit_tests(rules: Path, rules_text: str, tests: dict[str, Any], tmp_path: Path) -> str:
    """Run `tests` (a promtool test file's content) against `rules_text` as the rule file
    `rules` names; promtool's output, empty when it passed."""
    (tmp_path / rules.name).write_text(rules_text, encoding="utf-8")
    (tmp_path / "unit_test.yaml").write_text(yaml_dump(tests), encoding="utf-8")
    result = run_promtool("test", "rules", "unit_test.yaml", cwd=tmp_path)
    return "" if result.returncode == 0 else result.stdout + result.stderr


def unit_tests_named(path: Path, *names: str) -> dict[str, Any]:
    """The promtool test file `path` with only the tests whose name holds one of `names`
    (each promtool run of a whole file takes seconds)."""
    data = deploy_yaml(path)
    data["tests"] = [t for t in data["tests"] if any(n in t["name"] for n in names)]
    assert data["tests"], names
    return data


def rule_shape(document: dict[str, Any]) -> list[tuple[Any, ...]]:
    """A rule file's rules without their expressions and durations: what a timescale may
    not change."""
    return [
        (r.get("record"), r.get("alert"), r.get("labels"), "for" in r)
        for g in document["groups"]
        for r in g["rules"]
    ]


def promtool_check_exprs(named_exprs: Iterable[tuple[str, str]], tmp_path: Path) -> str:
    """Parse every expression with Prometheus's own parser; '' or promtool's complaint."""
    groups = [
        {"name": name, "rules": [{"record": f"check:expr_{index}", "expr": expr}]}
        for index, (name, expr) in enumerate(named_exprs)
    ]
    path = tmp_path / "exprs.rules.yaml"
    path.write_text(yaml_dump({"groups": groups}), encoding="utf-8")
    result = run_promtool("check", "rules", str(path))
    return "" if result.returncode == 0 else result.stdout + result.stderr
