"""End to end: the exporter in demo mode and a real Prometheus scraping it every 2 s on
loopback, with the alert, rank and lifecycle rules loaded. After some scrapes, every PromQL
expression of the dashboard and of the rules must return data through Prometheus's HTTP API.

How the alert rules are checked. A rule's full expression returns series only while the
alert fires, and the demo is meant to be healthy, so "the expression returns data" cannot be
asked of it. Instead, for every rule:
1. Prometheus loaded and evaluated it without error (`/api/v1/rules`: health "ok"), which
   also catches what parsing cannot: many-to-many matches, duplicate output label sets.
2. Every vector selector in the expression, with its label matchers but without offset,
   returns at least one series: each metric and label value the rule depends on exists in
   what the real exporter exposes.
3. The non-number side of every comparison with a number (the expression minus its
   threshold, e.g. `time() - training_pod_last_sample_timestamp_seconds` of `... > 900`)
   returns at least one series, and so does every comparison of two vectors rewritten with
   `bool` (`required > bool budget`: both sides exist and their labels match): the rule
   computes a value over real data, and only its threshold decides whether it fires.
   `absent(...)` has no threshold; 2 covers it.

Dashboard queries are checked with every variable at "All" (`.*`), and each variable-using
query once more with concrete values of the variables (read from Prometheus the way Grafana
does: label values of the variable's selector); one concrete value that returns data passes.

Until every provider of the demo (AIHC and Alaya) exports job and pod series, the data checks
are expected failures (each provider fills panels the other cannot); everything else (both
processes, scrapes, rules loaded and evaluated, the exporter's own series) is checked strictly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from deploy_helpers import (
    ALERTS,
    LIFECYCLE,
    RANKS,
    REPO,
    alert_rules,
    dashboard_json,
    go_tool_env,
    lifecycle_rules,
    load_generator,
    panel_queries,
    rank_rules,
    regex_value,
    selectors,
    substitute,
    threshold_operands,
    tool,
    variable_queries,
)

from tests.conftest import EXPORTER_BOUND

# The whole module (both processes, waits and queries) must finish well inside 90 s.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

SCRAPE_INTERVAL = 2
# Enough samples for rate() over RATE_INTERVAL and delta() in the rules.
MIN_SCRAPES = 6
RATE_INTERVAL = "30s"
STARTUP_BUDGET = 60.0
ALL = {"provider": ".*", "resource_pool": ".*", "job": ".*"}

T = TypeVar("T")


# What Prometheus logs once it has bound 127.0.0.1:0: the port it got (the exporter's:
# tests/conftest.py's EXPORTER_BOUND).
PROMETHEUS_BOUND = re.compile(r'msg="Listening on" address=127\.0\.0\.1:(\d+)')


def bound_port(
    proc: subprocess.Popen[bytes], log: Path, pattern: re.Pattern[str], deadline: float
) -> int:
    """The port `proc`, told to listen on 127.0.0.1:0, got, read from its `log`.

    A port picked by the test and handed to a process later can be taken by another process
    in between (it was, once, on a busy machine); a port the process bound itself cannot.
    """
    while True:
        match = pattern.search(log.read_text(errors="replace"))
        if match:
            return int(match[1])
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            pytest.fail(f"{proc.args!r} told no bound port (exit {proc.returncode})\n{tail}")
        time.sleep(0.1)


@contextmanager
def running(cmd: list[str], log: Path, **popen: Any) -> Iterator[subprocess.Popen[bytes]]:
    """A child process, stopped (TERM, then KILL) however the block ends."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, **popen)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def exporter_env() -> dict[str, str]:
    """This checkout's exporter, as tests/conftest.py's cli_env runs it, no TJE_ overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TJE_")}
    env["PYTHONPATH"] = str(REPO)
    return env


@dataclass
class Stack:
    exporter_url: str
    prometheus_url: str
    logs: list[Path]
    procs: list[subprocess.Popen[bytes]]

    def diagnostics(self) -> str:
        return "\n".join(
            f"--- {log.name} (last lines)\n"
            + "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            for log in self.logs
        )

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.prometheus_url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            with error:
                body = error.read().decode(errors="replace")
            raise AssertionError(f"{path} {params}: HTTP {error.code}: {body}") from None

    def query(self, expr: str) -> list[dict[str, Any]]:
        reply = self.get("/api/v1/query", query=expr)
        assert reply["status"] == "success", reply
        result: list[dict[str, Any]] = reply["data"]["result"]
        return result

    def label_values(self, selector: str, label: str) -> list[str]:
        reply = self.get(f"/api/v1/label/{label}/values", **{"match[]": selector})
        return [str(v) for v in reply["data"]]


def wait_for(what: str, stack: Stack, deadline: float, probe: Callable[[], T | None]) -> T:
    while True:
        for proc in stack.procs:
            if proc.poll() is not None:
                pytest.fail(
                    f"a process exited ({proc.returncode}) while waiting for {what}\n"
                    + stack.diagnostics()
                )
        try:
            result = probe()
        except (OSError, AssertionError):
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n" + stack.diagnostics())
        time.sleep(0.5)


def http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as response:
        return bool(response.status == 200)


def announce(targets: Path, *addresses: str) -> None:
    """List `addresses` in the targets file, whole at once (renamed into place)."""
    part = targets.with_suffix(".part")
    part.write_text(json.dumps([{"targets": list(addresses)}] if addresses else []))
    os.replace(part, targets)


def write_prometheus_config(
    path: Path, targets: Path, rule_files: list[Path], interval: float
) -> None:
    """Write a Prometheus configuration to `path`: scraping the exporter that the file
    `targets` lists (written empty here, until `announce`), and evaluating `rule_files`,
    every `interval` seconds.

    Prometheus sends its first targets to its scrapers about 5 s after it starts (its
    discovery updates go out every 5 s), whenever they were found: started with an empty
    list before the exporter, and told the exporter's port once it has bound one, it scrapes
    at that first update instead of 5 s after the exporter bound its port."""
    announce(targets)
    every = f"{interval:g}s"
    config = {
        "global": {"scrape_interval": every, "scrape_timeout": every, "evaluation_interval": every},
        "rule_files": [str(rules) for rules in rule_files],
        "scrape_configs": [
            {"job_name": "training-job-exporter", "file_sd_configs": [{"files": [str(targets)]}]}
        ],
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tmp = tmp_path_factory.mktemp("e2e")
    config = tmp / "exporter.yaml"
    config.write_text("poll_interval: 5s\n", encoding="utf-8")
    prom_config = tmp / "prometheus.yaml"
    # ranks.yaml evaluates once a minute; its copy here as often as the scrapes (same rules).
    rank_module = load_generator().rank_rules
    ranks = tmp / RANKS.name
    scaled = rank_module.PRODUCTION.scaled(SCRAPE_INTERVAL / rank_module.PRODUCTION.interval)
    ranks.write_text(rank_module.text(scaled), encoding="utf-8")
    lifecycle_module = load_generator().lifecycle_rules
    lifecycle = tmp / LIFECYCLE.name
    factor = SCRAPE_INTERVAL / lifecycle_module.PRODUCTION.interval
    lifecycle.write_text(
        lifecycle_module.text(lifecycle_module.PRODUCTION.scaled(factor)), encoding="utf-8"
    )
    exporter_cmd = [
        sys.executable,
        "-m",
        "exporter",
        "--demo",
        "--config",
        str(config),
        "--web.listen-address",
        "127.0.0.1:0",
        "--log.format",
        "console",
    ]
    prometheus_cmd = [
        tool("prometheus"),
        f"--config.file={prom_config}",
        f"--storage.tsdb.path={tmp / 'tsdb'}",
        "--web.listen-address=127.0.0.1:0",
    ]
    logs = [tmp / "exporter.log", tmp / "prometheus.log"]
    deadline = time.monotonic() + STARTUP_BUDGET
    targets = tmp / "targets.json"
    write_prometheus_config(prom_config, targets, [ALERTS, ranks, lifecycle], SCRAPE_INTERVAL)
    with ExitStack() as processes:
        # First: its first scrape comes about 5 s after it starts (`write_prometheus_config`).
        prometheus = processes.enter_context(
            running(prometheus_cmd, logs[1], cwd=tmp, env=go_tool_env())
        )
        exporter = processes.enter_context(
            running(exporter_cmd, logs[0], env=exporter_env(), cwd=tmp)
        )
        exporter_port = bound_port(exporter, logs[0], EXPORTER_BOUND, deadline)
        announce(targets, f"127.0.0.1:{exporter_port}")
        prometheus_port = bound_port(prometheus, logs[1], PROMETHEUS_BOUND, deadline)
        stack = Stack(
            f"http://127.0.0.1:{exporter_port}",
            f"http://127.0.0.1:{prometheus_port}",
            logs,
            [exporter, prometheus],
        )
        wait_for(
            "the exporter's first polls",
            stack,
            deadline,
            lambda: http_ok(f"{stack.exporter_url}/-/ready"),
        )
        wait_for("Prometheus", stack, deadline, lambda: http_ok(f"{stack.prometheus_url}/-/ready"))
        wait_for(
            f"{MIN_SCRAPES} good scrapes",
            stack,
            deadline,
            lambda: stack.query(
                f'sum_over_time(up{{job="training-job-exporter"}}[1m]) >= {MIN_SCRAPES}'
            ),
        )
        wait_for(
            "every rule evaluated",
            stack,
            deadline,
            lambda: (
                all(
                    not rule["lastEvaluation"].startswith("0001-")
                    for group in stack.get("/api/v1/rules")["data"]["groups"]
                    for rule in group["rules"]
                )
                or None
            ),
        )
        # A failed job's class waits for its final reads (pods, events), which a loaded
        # machine can put after the first evaluations: the burst rule has nothing to count
        # until then.
        wait_for(
            "a planted failure classified and counted",
            stack,
            deadline,
            lambda: stack.query("training_queue:jobs_failed:count") or None,
        )
        yield stack


def require_job_data(stack: Stack) -> None:
    """xfail while a provider of the demo exports no job or pod series (not merged yet)."""
    polled = {s["metric"]["provider"] for s in stack.query("training_exporter_up")}
    exporting = {
        s["metric"]["provider"]
        for s in stack.query('count by (provider) ({__name__=~"training_(job|pod)_.+"})')
    }
    if polled - exporting:
        pytest.xfail(f"the demo's {sorted(polled - exporting)} export no job or pod series yet")


def test_prometheus_scrapes_the_exporter(stack: Stack) -> None:
    (target,) = stack.get("/api/v1/targets")["data"]["activeTargets"]
    assert target["health"] == "up", target
    up = stack.query('training_exporter_up{job="training-job-exporter"}')
    assert {s["metric"]["provider"] for s in up} == {"aihc", "alaya"}
    assert stack.query("training_exporter_build_info")


def test_alert_rules_load_and_evaluate_cleanly(stack: Stack) -> None:
    rules = {
        rule["name"]: rule
        for group in stack.get("/api/v1/rules")["data"]["groups"]
        for rule in group["rules"]
    }
    assert set(rules) == {r["alert"] for r in alert_rules()} | {
        r.get("alert") or r["record"] for r in [*rank_rules(), *lifecycle_rules()]
    }
    broken = {name: r.get("lastError") for name, r in rules.items() if r["health"] != "ok"}
    assert broken == {}


def test_alert_rule_selectors_and_thresholded_operands_return_data(stack: Stack) -> None:
    """Of alerts.yaml, ranks.yaml and lifecycle.yaml, recording rules included (the demo
    plants a job of each rank fault and each lifecycle case, so even the outlier comparisons
    and the burst's have series to compare)."""
    require_job_data(stack)
    empty = []
    for rule in [*alert_rules(), *rank_rules(), *lifecycle_rules()]:
        name = rule.get("alert") or rule["record"]
        for expr in [s.promql() for s in selectors(rule["expr"])] + threshold_operands(
            rule["expr"]
        ):
            if not stack.query(expr):
                empty.append(f"{name}: {expr}")
    assert empty == [], "no series for:\n" + "\n".join(empty)


def test_every_dashboard_query_returns_data_for_all(stack: Stack) -> None:
    require_job_data(stack)
    empty = [
        f"{q.name}: {substitute(q.expr, ALL, RATE_INTERVAL)}"
        for q in panel_queries(dashboard_json())
        if not stack.query(substitute(q.expr, ALL, RATE_INTERVAL))
    ]
    assert empty == [], "no series for:\n" + "\n".join(empty)


def variable_values(stack: Stack) -> dict[str, list[str]]:
    """Each variable's values as Grafana lists them with the others at All, per provider.

    All of them, not a sample: which demo jobs are running changes with the clock, so a
    sample could hold none that has resource series."""
    providers = stack.label_values("training_exporter_up", "provider")
    values: dict[str, list[str]] = {}
    for query in variable_queries(dashboard_json()):
        found: list[str] = []
        for provider in providers:
            selector = substitute(query.selector, {**ALL, "provider": regex_value(provider)})
            found += stack.label_values(selector, query.label)
        values[query.name] = sorted(set(found))
    return values


def test_dashboard_variables_have_values(stack: Stack) -> None:
    require_job_data(stack)
    values = variable_values(stack)
    assert {name for name, found in values.items() if not found} == set()


def test_every_dashboard_query_returns_data_for_some_variable_value(stack: Stack) -> None:
    require_job_data(stack)
    values = variable_values(stack)
    empty = []
    for query in panel_queries(dashboard_json()):
        for name, candidates in values.items():
            if f"${name}" not in query.expr:
                continue
            if not any(
                stack.query(
                    substitute(query.expr, {**ALL, name: regex_value(value)}, RATE_INTERVAL)
                )
                for value in candidates
            ):
                empty.append(f"{query.name} with ${name} in {candidates}")
    assert empty == [], "no series for any value:\n" + "\n".join(empty)
