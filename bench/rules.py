"""How long Prometheus takes to evaluate deploy/prometheus/ranks.yaml and lifecycle.yaml at the
exporter's scale.

A synthetic exposition of `--jobs` jobs (1,000 by default) x 8 pods x 8 cards, in step with
small noise and a few outliers, served from this process: GPU utilisation per card (as Alaya
reports it) and the other rank signals per pod (as AIHC reports them), or, with
`--per-card all`, every signal per card (the upper bound), plus pod phases, info (a master
and workers) and restarts, and each job's status and lifecycle series: a tenth of the jobs
failed (with a failure class), a twentieth waiting, a fifth with time restarting, the rest
Running, in 8 queues. Debian's Prometheus scrapes it and evaluates the rules, built by
deploy/rank_rules.py and deploy/lifecycle_rules.py on a timescale where the evaluation
interval is `--interval` (each window keeps as many evaluations as in production), beside a
floor group: one `max by` a job per signal, a single pass over the same series. The figure is
Prometheus' own `prometheus_rule_group_last_duration_seconds`, the most seen over the run, per
group, as a share of production's interval (60 s; the goal is well under 1) and as a multiple
of the floor's (timings on a shared machine are only comparable within a run).

    python -m bench.rules [--jobs 1000] [--pods 8] [--cards 8] [--per-card util|all]
                          [--interval 30] [--evaluations 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.ports import bound_port

ROOT = Path(__file__).resolve().parent.parent
UTIL = "training_pod_gpu_utilization_ratio"
PHASES = ("Pending", "Starting", "Running", "Failed", "Succeed", "Succeeded", "Unknown")
STATUSES = ("Pending", "Running", "Restarting", "Succeeded", "Failed")
CLASSES = ("hardware", "oom", "collective", "user_exit", "unknown")


def _load(name: str) -> Any:
    path = ROOT / "deploy" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"deploy_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def rank_rules() -> Any:
    return _load("rank_rules")


def lifecycle_rules() -> Any:
    return _load("lifecycle_rules")


def _life(j: int, job: str, now: float) -> tuple[str, list[str]]:
    """Job `j`'s status and lifecycle series: failed, waiting, or running (some restarted)."""
    status = "Failed" if j % 10 == 3 else "Pending" if j % 20 == 7 else "Running"
    waiting = status == "Pending"
    created = now - 3600 - 37 * j
    wait = 30 + 11 * (j % 97)
    lines = [
        f"training_job_created_timestamp_seconds{{{job}}} {created}",
        f"training_job_replicas{{{job}}} 8",
        f'training_job_gpus_per_pod{{{job},source="spec"}} 8',
        f"training_job_queue_wait_seconds{{{job}}} {now - created if waiting else wait}",
    ]
    if not waiting:
        lines.append(f"training_job_started_timestamp_seconds{{{job}}} {created + wait}")
    if status == "Failed":
        lines.append(f"training_job_finished_timestamp_seconds{{{job}}} {now - 60 * (j % 50)}")
        lines.append(f'training_job_failure_class{{{job},class="{CLASSES[j % len(CLASSES)]}"}} 1')
    if j % 5 == 1:
        lines.append(f"training_job_restarting_seconds{{{job}}} {60 * (j % 7)}")
    for known in STATUSES:
        lines.append(f'training_job_status{{{job},status="{known}"}} {int(known == status)}')
    return status, lines


def exposition(jobs: int, pods: int, cards: int, all_per_card: bool, seed: int = 29) -> bytes:
    """The pool as exposition text: GPU utilisation per card, the other signals per pod (or
    per card too), pods' phases, info and restarts, jobs' status, running time and life."""
    ranks = rank_rules()
    rng = random.Random(seed)
    levels = {s.metric: max(s.floor * 40, 1e9 if s.relative_floor else 0.8) for s in ranks.SIGNALS}
    levels["training_pod_gpu_utilization_ratio"] = 0.8
    lines: list[str] = ['training_exporter_series{provider="aihc"} 1']
    now = time.time()
    for j in range(jobs):
        job = f'provider="aihc",resource_pool="cce-bench",queue="q{j % 8}",job_id="job-{j:04d}"'
        status, life = _life(j, job, now)
        lines += life
        lines.append(f"training_job_running_seconds{{{job}}} 7200")
        for p in range(pods):
            name = f"job-{j:04d}-master-0" if p == 0 else f"job-{j:04d}-worker-{p - 1}"
            pod = f'{job},pod="{name}"'
            kind = "master" if p == 0 else "worker"
            lines.append(f'training_pod_info{{{pod},replica_type="{kind}",node="n",pod_ip="ip"}} 1')
            lines.append(f"training_pod_restarts{{{pod}}} {j % 3}")
            phase_now = "Running" if status == "Running" else "Pending"
            for phase in PHASES:
                lines.append(
                    f'training_pod_phase{{{pod},phase="{phase}"}} {int(phase == phase_now)}'
                )
            for c in range(cards):
                card = f'{pod},gpu="H800-{c}"'
                outlier = 0.5 if (j % 25, p, c) == (0, 3, 5) else 1.0
                for metric, level in levels.items():
                    if not all_per_card and metric != UTIL:
                        if c > 0:
                            continue
                        card = pod
                    value = level * outlier * (1 + 0.01 * (rng.random() - 0.5))
                    lines.append(f"{metric}{{{card}}} {value:.6g}")
    return ("\n".join(lines) + "\n").encode()


def serve(body: bytes) -> tuple[ThreadingHTTPServer, int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, int(server.server_address[1])


def query(url: str, expr: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    ) as r:
        result: list[dict[str, Any]] = json.load(r)["data"]["result"]
        return result


def last_durations(url: str) -> dict[str, float]:
    """Rule group -> prometheus_rule_group_last_duration_seconds, from Prometheus' /metrics."""
    with urllib.request.urlopen(f"{url}/metrics") as response:
        text = response.read().decode()
    found = {}
    for family in text_string_to_metric_families(text):
        if family.name == "prometheus_rule_group_last_duration_seconds":
            for sample in family.samples:
                found[sample.labels["rule_group"].rsplit(";", 1)[-1]] = sample.value
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--cards", type=int, default=8)
    parser.add_argument(
        "--per-card",
        choices=("util", "all"),
        default="util",
        help="which signals have a series per card (util: GPU utilisation only)",
    )
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between evaluations")
    parser.add_argument("--evaluations", type=int, default=4, help="evaluations to watch")
    args = parser.parse_args(argv)
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        print("prometheus not found on PATH (Debian's prometheus package)", file=sys.stderr)
        return 2
    ranks = rank_rules()
    scale = ranks.PRODUCTION.scaled(args.interval / ranks.PRODUCTION.interval)
    body = exposition(args.jobs, args.pods, args.cards, args.per_card == "all")
    series = body.count(b"\n")
    server, port = serve(body)
    with tempfile.TemporaryDirectory(prefix="bench-rules-") as tmp:
        rules = Path(tmp) / "ranks.yaml"
        interval = ranks.duration(args.interval)
        document = ranks.rules(scale)
        lifecycle = lifecycle_rules()
        life_scale = lifecycle.PRODUCTION.scaled(args.interval / lifecycle.PRODUCTION.interval)
        document["groups"] += lifecycle.rules(life_scale)["groups"]
        job = "provider, resource_pool, queue, job_id"
        floor = [
            {"record": f"floor:{s.short}:max", "expr": f"max by ({job}) ({s.metric})"}
            for s in ranks.SIGNALS
        ]
        document["groups"].append({"name": "floor", "interval": interval, "rules": floor})
        rules.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval},
            "rule_files": [str(rules)],
            "scrape_configs": [
                {"job_name": "pool", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}
            ],
        }
        (Path(tmp) / "prometheus.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={tmp}/prometheus.yaml",
                f"--storage.tsdb.path={tmp}/tsdb",
                "--web.listen-address=127.0.0.1:0",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        worst: dict[str, float] = {}
        try:
            url = f"http://127.0.0.1:{bound_port(proc)}"
            end = time.monotonic() + 15 + args.interval * (args.evaluations + 1)
            while time.monotonic() < end:
                time.sleep(args.interval / 2)
                try:
                    found = last_durations(url)
                except OSError:
                    continue
                for group, seconds in found.items():
                    worst[group] = max(worst.get(group, 0.0), seconds)
            with urllib.request.urlopen(f"{url}/api/v1/rules") as response:
                groups = json.load(response)["data"]["groups"]
            slowest = sorted(
                ((r["evaluationTime"], r["name"]) for g in groups for r in g["rules"]),
                reverse=True,
            )[:5]
            scores = query(url, "count(training_pod:robust_score)")
            outliers = query(url, "count(abs(training_pod:robust_score) > 3.5)")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            server.shutdown()
    print(
        f"{args.jobs} jobs x {args.pods} pods x {args.cards} cards, per card: {args.per_card}: "
        f"{series} series scraped, "
        f"{scores[0]['value'][1] if scores else 0} scores, "
        f"{outliers[0]['value'][1] if outliers else 0} of them outside 3.5"
    )
    for group, seconds in sorted(worst.items()):
        print(
            f"{group}: {seconds:.3f} s per evaluation (the most in {args.evaluations}), "
            f"{seconds / ranks.PRODUCTION.interval:.4f} of production's "
            f"{ranks.PRODUCTION.interval:g} s interval, "
            f"{seconds / worst.get('floor', seconds):.1f} x the floor"
        )
    print(
        "slowest rules at the last evaluation: "
        + ", ".join(f"{name} {seconds:.3f} s" for seconds, name in slowest)
    )
    return 0 if worst else 1


if __name__ == "__main__":
    sys.exit(main())
