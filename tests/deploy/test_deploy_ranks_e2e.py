"""End to end, on a simulated timescale: `simulate` serving 10 healthy AIHC jobs of 4 pods,
one planted fault of each kind, and a lifecycle world 120 times faster than life (queues that
wait, background failures, one planted failure of each class, a burst of hardware failures, a
restart loop, a job waiting far too long), and Alaya's two jobs of 3 pods x 8 cards with one
slow card; the exporter polling both; a real Prometheus scraping the exporter every second
with ranks.yaml and lifecycle.yaml loaded, built by the same code as the shipped files on a
timescale 120 times shorter (10 minutes are 5 s) and evaluated once a scrape. Each planted
failure is classified as planted; each planted fault and lifecycle case fires its alert naming
the right job and pod (card), or queue and class; no other alert ever fires (Prometheus' own
ALERTS history says); and every query of the dashboard's Ranks, Idle GPU-hours and Lifecycle
rows returns data.

Ten healthy jobs: a world with planted faults keeps each job's pods in step (within 1 % of the
range of each other), so whether a healthy job scores depends on the rules' floors against
that noise, not on how many jobs there are (without the floors, several of the 40 healthy
pods fire).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import yaml
from deploy_helpers import (
    all_panels,
    dashboard_json,
    go_tool_env,
    load_generator,
    panel_queries,
    regex_value,
    substitute,
    tool,
)
from test_deploy_e2e_prometheus import (
    PROMETHEUS_BOUND,
    Stack,
    announce,
    bound_port,
    exporter_env,
    http_ok,
    running,
    wait_for,
    write_prometheus_config,
)

from exporter.simulator import lifecycle as sim_lifecycle
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld
from exporter.simulator.cli import parser as simulator_parser
from exporter.simulator.services import simulated
from tests.conftest import EXPORTER_BOUND

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

SEED = 29
HEALTHY_JOBS = 10
SCALE = 1 / 120
# Prometheus scrapes the exporter and evaluates the rules this often, in seconds. The rules'
# own interval (a minute) would scale to half a second: two evaluations of every scrape, the
# second on the same data, which took half of Prometheus' CPU here. In production, too, the
# rules are evaluated no more often than the exporter is scraped.
SCRAPE_INTERVAL = 1.0
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
LIFECYCLE_LINE = re.compile(
    r"AIHC lifecycle (?P<case>[\w-]+): job (?P<job>\S+), queue (?P<queue>\S+)$"
)
# The lifecycle cases: one failure of each class, three of hardware, a wait and a loop.
LIFECYCLE_CASES = len(sim_lifecycle.FAILURE_CLASSES) + 2 + 2


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
        "--aihc-lifecycle",
        "--aihc-lifecycle-scale",
        repr(SCALE),
        "--alaya-slow-card",
    ]


def alaya_world() -> AlayaWorld:
    """The Alaya world `simulate` serves with these options (seeded: the same jobs and card)."""
    world: AlayaWorld = simulated()["alaya"].world(
        SEED, simulator_parser().parse_args(simulate_args())
    )
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
                # Events: the evidence of a failed job's class.
                "events": True,
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


@dataclass
class Planted:
    """What the simulator's greeting says it planted."""

    # fault -> {job, pod}
    faults: dict[str, dict[str, str]] = field(default_factory=dict)
    # (case, job id, queue) of each lifecycle case
    lifecycle: list[tuple[str, str, str]] = field(default_factory=list)

    def jobs(self, case: str) -> list[str]:
        return [job for c, job, _ in self.lifecycle if c == case]


def simulator_port(proc: subprocess.Popen[str]) -> int:
    """The port the simulator, told to listen on 127.0.0.1:0, got: its greeting's first line."""
    assert proc.stdout is not None
    first = proc.stdout.readline()
    assert first.startswith("simulator listening on "), first
    return int(first.strip().rsplit(":", 1)[1])


def read_planted(proc: subprocess.Popen[str], deadline: float) -> Planted:
    """What was planted, from the simulator's greeting (it prints it at start)."""
    assert proc.stdout is not None
    planted = Planted()
    while (
        len(planted.faults) < len(EXPECTED) or len(planted.lifecycle) < LIFECYCLE_CASES
    ) and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        match = PLANTED_LINE.search(line.strip())
        if match:
            planted.faults[match["fault"]] = {"job": match["job"], "pod": match["pod"] or ""}
        case = LIFECYCLE_LINE.search(line.strip())
        if case:
            planted.lifecycle.append((case["case"], case["job"], case["queue"]))
    assert set(planted.faults) == set(EXPECTED), planted
    assert len(planted.lifecycle) == LIFECYCLE_CASES, planted
    return planted


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Planted]]:
    tmp = tmp_path_factory.mktemp("ranks-e2e")
    generator = load_generator()
    ranks, lifecycle = generator.rank_rules, generator.lifecycle_rules
    rank_scale = replace(ranks.PRODUCTION.scaled(SCALE), interval=SCRAPE_INTERVAL)
    lifecycle_scale = replace(lifecycle.PRODUCTION.scaled(SCALE), interval=SCRAPE_INTERVAL)
    (tmp / "ranks.yaml").write_text(ranks.text(rank_scale), encoding="utf-8")
    (tmp / "lifecycle.yaml").write_text(lifecycle.text(lifecycle_scale), encoding="utf-8")
    config, prom_config = tmp / "exporter.yaml", tmp / "prometheus.yaml"
    simulator_cmd = [
        sys.executable,
        "-m",
        "exporter",
        "simulate",
        "--listen",
        "127.0.0.1:0",
        *simulate_args(),
    ]
    exporter_cmd = [
        sys.executable,
        "-m",
        "exporter",
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
    targets = tmp / "targets.json"
    rule_files = [tmp / "ranks.yaml", tmp / "lifecycle.yaml"]
    write_prometheus_config(prom_config, targets, rule_files, SCRAPE_INTERVAL)
    deadline = time.monotonic() + 30
    with ExitStack() as processes:
        # First: its first scrape comes about 5 s after it starts (`write_prometheus_config`).
        prometheus = processes.enter_context(
            running(prometheus_cmd, logs[1], cwd=tmp, env=go_tool_env())
        )
        simulator = processes.enter_context(_piped(simulator_cmd, env=exporter_env(), cwd=tmp))
        config.write_text(
            yaml.safe_dump(exporter_config(simulator_port(simulator))), encoding="utf-8"
        )
        planted = read_planted(simulator, deadline)
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


Named = tuple[str, str, str, str, str, str]


def named(labels: dict[str, str]) -> Named:
    """An alert by its name and the labels that say what it is about."""
    return (
        labels["alertname"],
        labels.get("job_id", ""),
        labels.get("pod", ""),
        labels.get("gpu", ""),
        labels.get("queue", "") if "job_id" not in labels else "",
        labels.get("class", ""),
    )


def expected_alerts(planted: Planted) -> set[Named]:
    alaya = alaya_world()
    (((job, pod), card),) = alaya.slow_cards.items()
    faults = planted.faults
    (pending,), (loop,) = planted.jobs("pending"), planted.jobs("restart-loop")
    return {
        (alert, faults[fault]["job"], faults[fault]["pod"] if names_pod else "", "", "", "")
        for fault, (names, names_pod) in EXPECTED.items()
        for alert in names
    } | {
        ("TrainingRankSlow", job, pod, alaya.card_names()[card], "", ""),
        ("TrainingJobPendingTooLong", pending, "", "", "", ""),
        ("TrainingJobRestartLoop", loop, "", "", "", ""),
        ("TrainingFailureBurst", "", "", "", sim_lifecycle.PLANTED_QUEUE, "hardware"),
    }


def ever_fired(stack: Stack) -> set[Named]:
    """Every alert that has fired since Prometheus started: its own ALERTS series keep them,
    so one that fired and resolved between two looks is seen as well."""
    return {
        named(s["metric"]) for s in stack.query('max_over_time(ALERTS{alertstate="firing"}[1h])')
    }


def test_each_planted_case_fires_its_alert_and_nothing_else_ever_fires(
    stack: tuple[Stack, Planted],
) -> None:
    prometheus, planted = stack
    wanted = expected_alerts(planted)

    seen: set[Named] = set()

    def all_fired() -> set[Named] | None:
        fired = ever_fired(prometheus)
        seen.update(fired)
        return fired if fired >= wanted else None

    try:
        fired = wait_for(
            "every planted case's alert", prometheus, time.monotonic() + FIRING_BUDGET, all_fired
        )
    except pytest.fail.Exception as failed:
        pytest.fail(f"never fired: {sorted(wanted - seen)}\n{failed}")
    assert fired == wanted
    healthy = 'training_job_info{job_name=~"train-.*|planted-(slow-rank|throttled-card|hung|idle)"}'
    running = prometheus.query(
        f'count(training_job_status{{status="Running"}} == 1 and on(job_id) {healthy})'
    )
    assert float(running[0]["value"][1]) == HEALTHY_JOBS + len(EXPECTED)


def test_each_planted_failure_is_classified_as_planted(stack: tuple[Stack, Planted]) -> None:
    prometheus, planted = stack
    failures = [(c, j) for c, j, _ in planted.lifecycle if c in sim_lifecycle.FAILURE_CLASSES]

    def classes() -> dict[str, str] | None:
        found = {
            s["metric"]["job_id"]: s["metric"]["class"]
            for s in prometheus.query("training_job_failure_class == 1")
        }
        return found if all(job in found for _, job in failures) else None

    found = wait_for("every planted failure's class", prometheus, time.monotonic() + 30, classes)
    assert {job: found[job] for _, job in failures} == {job: case for case, job in failures}
    every = {s["metric"]["class"] for s in prometheus.query("training_job_failure_class == 1")}
    assert every <= set(sim_lifecycle.FAILURE_CLASSES)


ROWS = ("Ranks (choose one job)", "Idle GPU-hours", "Lifecycle")


def row_queries(rows: tuple[str, ...]) -> list[Any]:
    titles = set()
    inside = False
    for panel in all_panels(dashboard_json()):
        if panel["type"] == "row":
            inside = panel["title"] in rows
        elif inside:
            titles.add(panel["title"])
    return [q for q in panel_queries(dashboard_json()) if q.panel in titles]


def test_every_ranks_gpu_hours_and_lifecycle_query_returns_data(
    stack: tuple[Stack, Planted],
) -> None:
    """With every variable at All, and with the jobs each row is about chosen: the slow rank
    for the Ranks and Idle GPU-hours rows; the waiting, a failed and the looping job for the
    Lifecycle row (Grafana sends several values as an alternation)."""
    prometheus, planted = stack
    pool = regex_value(DEMO_RESOURCE_POOL)
    picked = [*planted.jobs("pending"), planted.jobs("hardware")[0], *planted.jobs("restart-loop")]
    every = {"provider": ".*", "resource_pool": ".*", "job": ".*"}
    checks = [
        (row, values)
        for rows, job in (
            (ROWS[:2], regex_value(planted.faults["slow-rank"]["job"])),
            (ROWS[2:], "(" + "|".join(regex_value(j) for j in picked) + ")"),
        )
        for row in rows
        for values in (every, {"provider": "aihc", "resource_pool": pool, "job": job})
    ]

    def empty() -> list[str]:
        return [
            f"{q.name} with {values}"
            for row, values in checks
            for q in row_queries((row,))
            if not prometheus.query(substitute(q.expr, values, "10s"))
        ]

    left = empty()
    deadline = time.monotonic() + FIRING_BUDGET
    while left and time.monotonic() < deadline:
        time.sleep(1)
        left = empty()
    assert left == []


def test_rules_evaluate_cleanly(stack: tuple[Stack, Planted]) -> None:
    prometheus, _ = stack
    groups = prometheus.get("/api/v1/rules")["data"]["groups"]
    assert {g["name"] for g in groups} == {
        "training-ranks",
        "training-gpu-hours",
        "training-lifecycle",
    }
    broken = {
        r["name"]: r.get("lastError") for g in groups for r in g["rules"] if r["health"] == "err"
    }
    assert broken == {}
