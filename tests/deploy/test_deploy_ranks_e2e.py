"""End to end, on a simulated timescale: `simulate` serving 50 healthy AIHC jobs of 4 pods and
one planted fault of each kind, and Alaya's two jobs of 3 pods x 8 cards with one slow card,
the exporter polling both, a real Prometheus scraping the
exporter every second with ranks.yaml loaded, built by the same code as the shipped file on a
timescale 120 times shorter (10 minutes are 5 s). Each planted fault fires its alert naming
the right job and pod (and card); nothing fires, or is pending, for the healthy jobs; and
every query of the dashboard's Ranks and Idle GPU-hours rows returns data.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import pytest
import yaml
from deploy_helpers import (
    all_panels,
    dashboard_json,
    load_generator,
    panel_queries,
    regex_value,
    substitute,
    tool,
)
from test_deploy_e2e_prometheus import Stack, exporter_env, free_port, http_ok, running, wait_for

from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld
from exporter.simulator.cli import _parser
from exporter.simulator.services import simulated

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

SEED = 29
HEALTHY_JOBS = 50
SCALE = 1 / 120
FIRING_BUDGET = 45.0
# The planted fault -> the alerts it must fire, and whether they name the pod.
EXPECTED = {
    "slow-rank": (("TrainingRankSlow", "TrainingRankLinkSlow"), True),
    "throttled-card": (("TrainingGpuThermalOutlier",), True),
    "hung": (("TrainingJobHung",), False),
    "idle": (("TrainingJobIdle",), False),
}
PLANTED_LINE = re.compile(
    r"AIHC planted (?P<fault>[\w-]+): job (?P<job>\S+?)(, pod (?P<pod>\S+))?$"
)


def simulate_args() -> list[str]:
    plant = [arg for fault in EXPECTED for arg in ("--aihc-plant", fault)]
    return [
        "--seed",
        str(SEED),
        "--aihc-jobs",
        str(HEALTHY_JOBS),
        "--aihc-pods",
        "4",
        *plant,
        "--alaya-slow-card",
    ]


def alaya_world() -> AlayaWorld:
    """The Alaya world `simulate` serves with these options (seeded: the same jobs and card)."""
    world: AlayaWorld = simulated()["alaya"].world(SEED, _parser().parse_args(simulate_args()))
    return world


def exporter_config(simulator_port: int) -> dict[str, Any]:
    alaya = alaya_world()
    return {
        "poll_interval": "2s",
        "aihc": [
            {
                "name": "e2e-ranks",
                "endpoint": f"http://127.0.0.1:{simulator_port}",
                "access_key_id": DEMO_ACCESS_KEY_ID,
                "secret_access_key": DEMO_SECRET_ACCESS_KEY,
                "resource_pool_id": DEMO_RESOURCE_POOL,
                # The rank signals only (and the pods, for their phases).
                "metric_types": [
                    "GpuUsage",
                    "GpuPowerUsage",
                    "GpuTemperature",
                    "RDMASendDataRate",
                    "RDMARecvDataRate",
                    "NVLinkSendDataRate",
                    "NVLinkRecvDataRate",
                ],
                "events": False,
                "limits": {"requests_per_second": "unlimited", "max_concurrency": 16},
            }
        ],
        "alaya": [
            {
                "name": "e2e-ranks-alaya",
                "endpoint": f"http://127.0.0.1:{simulator_port}",
                "api_key": DEMO_API_KEY,
                "types": ["gpu"],
                "jobs": [{"id": job, "pods": pods} for job, pods in alaya.jobs.items()],
                "limits": {"requests_per_second": "unlimited"},
            }
        ],
    }


def read_planted(proc: subprocess.Popen[str], deadline: float) -> dict[str, dict[str, str]]:
    """fault -> {job, pod} from the simulator's greeting (it prints them at start)."""
    assert proc.stdout is not None
    planted: dict[str, dict[str, str]] = {}
    while len(planted) < len(EXPECTED) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = PLANTED_LINE.search(line.strip())
        if match:
            planted[match["fault"]] = {"job": match["job"], "pod": match["pod"] or ""}
    assert set(planted) == set(EXPECTED), planted
    return planted


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("ranks-e2e")
    ranks = load_generator().rank_rules
    sim_port, exporter_port, prometheus_port = free_port(), free_port(), free_port()
    (tmp / "ranks.yaml").write_text(ranks.text(ranks.PRODUCTION.scaled(SCALE)), encoding="utf-8")
    config = tmp / "exporter.yaml"
    config.write_text(yaml.safe_dump(exporter_config(sim_port)), encoding="utf-8")
    prom_config = tmp / "prometheus.yaml"
    prom_config.write_text(
        yaml.safe_dump(
            {
                "global": {
                    "scrape_interval": "1s",
                    "scrape_timeout": "1s",
                    "evaluation_interval": "1s",
                },
                "rule_files": [str(tmp / "ranks.yaml")],
                "scrape_configs": [
                    {
                        "job_name": "training-job-exporter",
                        "static_configs": [{"targets": [f"127.0.0.1:{exporter_port}"]}],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    simulator_cmd = [
        sys.executable,
        "-m",
        "exporter",
        "simulate",
        "--listen",
        f"127.0.0.1:{sim_port}",
        *simulate_args(),
    ]
    exporter_cmd = [
        sys.executable,
        "-m",
        "exporter",
        "--config",
        str(config),
        "--web.listen-address",
        f"127.0.0.1:{exporter_port}",
        "--log.format",
        "console",
    ]
    prometheus_cmd = [
        tool("prometheus"),
        f"--config.file={prom_config}",
        f"--storage.tsdb.path={tmp / 'tsdb'}",
        f"--web.listen-address=127.0.0.1:{prometheus_port}",
    ]
    logs = [tmp / "exporter.log", tmp / "prometheus.log"]
    deadline = time.monotonic() + 30
    with ExitStack() as processes:
        simulator = processes.enter_context(_piped(simulator_cmd, env=exporter_env(), cwd=tmp))
        planted = read_planted(simulator, deadline)
        exporter = processes.enter_context(
            running(exporter_cmd, logs[0], env=exporter_env(), cwd=tmp)
        )
        prometheus = processes.enter_context(running(prometheus_cmd, logs[1], cwd=tmp))
        stack = Stack(
            f"http://127.0.0.1:{exporter_port}",
            f"http://127.0.0.1:{prometheus_port}",
            logs,
            [exporter, prometheus],
        )
        wait_for("the exporter", stack, deadline, lambda: http_ok(f"{stack.exporter_url}/-/ready"))
        wait_for("Prometheus", stack, deadline, lambda: http_ok(f"{stack.prometheus_url}/-/ready"))
        yield stack, planted


class _piped:
    """A child process whose stdout the test reads, stopped however the block ends."""

    def __init__(self, cmd: list[str], **popen: Any) -> None:
        self.cmd, self.popen = cmd, popen

    def __enter__(self) -> subprocess.Popen[str]:
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **self.popen
        )
        return self.proc

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def alerts(stack: Stack) -> list[dict[str, Any]]:
    reply = stack.get("/api/v1/alerts")
    found: list[dict[str, Any]] = reply["data"]["alerts"]
    return found


def expected_alerts(planted: dict[str, dict[str, str]]) -> set[tuple[str, str, str, str]]:
    alaya = alaya_world()
    (((job, pod), card),) = alaya.slow_cards.items()
    return {
        (alert, planted[fault]["job"], planted[fault]["pod"] if names_pod else "", "")
        for fault, (names, names_pod) in EXPECTED.items()
        for alert in names
    } | {("TrainingRankSlow", job, pod, alaya.card_names()[card])}


def named(alert: dict[str, Any]) -> tuple[str, str, str, str]:
    labels = alert["labels"]
    return (
        labels["alertname"],
        labels.get("job_id", ""),
        labels.get("pod", ""),
        labels.get("gpu", ""),
    )


def test_each_planted_fault_fires_its_alert_and_no_healthy_job_does(
    stack: tuple[Stack, dict[str, Any]],
) -> None:
    prometheus, planted = stack
    wanted = expected_alerts(planted)

    def all_firing() -> set[tuple[str, str, str, str]] | None:
        firing = {named(a) for a in alerts(prometheus) if a["state"] == "firing"}
        return firing if firing >= wanted else None

    firing = wait_for(
        "every planted fault's alert", prometheus, time.monotonic() + FIRING_BUDGET, all_firing
    )
    assert firing == wanted
    planted_jobs = {p["job"] for p in planted.values()} | {
        job for job, _ in alaya_world().slow_cards
    }
    healthy = [a["labels"] for a in alerts(prometheus) if a["labels"]["job_id"] not in planted_jobs]
    assert healthy == []
    running_jobs = prometheus.query('count(training_job_status{status="Running"} == 1)')
    assert float(running_jobs[0]["value"][1]) == HEALTHY_JOBS + len(EXPECTED)


def new_row_queries() -> list[Any]:
    titles = set()
    inside = False
    for panel in all_panels(dashboard_json()):
        if panel["type"] == "row":
            inside = panel["title"] in ("Ranks (choose one job)", "Idle GPU-hours")
        elif inside:
            titles.add(panel["title"])
    return [q for q in panel_queries(dashboard_json()) if q.panel in titles]


def test_every_ranks_and_gpu_hours_query_returns_data(
    stack: tuple[Stack, dict[str, Any]],
) -> None:
    prometheus, planted = stack
    wait_for(
        "the rank rules' first results",
        prometheus,
        time.monotonic() + FIRING_BUDGET,
        lambda: prometheus.query("training_pod:robust_score"),
    )
    slow_job = regex_value(planted["slow-rank"]["job"])
    empty = []
    for values in (
        {"provider": ".*", "resource_pool": ".*", "job": ".*"},
        {"provider": "aihc", "resource_pool": regex_value(DEMO_RESOURCE_POOL), "job": slow_job},
    ):
        empty += [
            f"{q.name} with {values}"
            for q in new_row_queries()
            if not prometheus.query(substitute(q.expr, values, "10s"))
        ]
    assert empty == []


def test_rules_evaluate_cleanly(stack: tuple[Stack, dict[str, Any]]) -> None:
    prometheus, _ = stack
    groups = prometheus.get("/api/v1/rules")["data"]["groups"]
    assert {g["name"] for g in groups} == {"training-ranks", "training-gpu-hours"}
    broken = {
        r["name"]: r.get("lastError") for g in groups for r in g["rules"] if r["health"] == "err"
    }
    assert broken == {}
