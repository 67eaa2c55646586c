"""Write the Grafana dashboard, the rank rules and the Helm chart's copies of the dashboard,
alert and rank rules and example configuration.

    python deploy/generate.py          # rewrite the generated files
    python deploy/generate.py --check  # exit 1 naming each file that is out of date

The dashboard is built here, not edited by hand, so that every panel uses the same label
selectors and the same joins. The chart cannot read files outside its own directory, so it
carries byte-for-byte copies of `grafana/training-jobs.json`, `prometheus/alerts.yaml`,
`prometheus/ranks.yaml` and `config/exporter.yaml` (its configuration defaults) under `files/`;
tests/deploy runs `--check` so no copy can drift. `prometheus/ranks.yaml` is written from
`rank_rules.py` beside this file.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

DEPLOY = Path(__file__).resolve().parent
DASHBOARD_PATH = DEPLOY / "grafana" / "training-jobs.json"
ALERTS_PATH = DEPLOY / "prometheus" / "alerts.yaml"
RANKS_PATH = DEPLOY / "prometheus" / "ranks.yaml"
LIFECYCLE_PATH = DEPLOY / "prometheus" / "lifecycle.yaml"
EXAMPLE_CONFIG_PATH = DEPLOY.parent / "config" / "exporter.yaml"
CHART_FILES = DEPLOY / "helm" / "training-job-exporter" / "files"

Json = dict[str, Any]


def _load_rank_rules() -> Any:
    """rank_rules.py beside this file (this script runs by path, not as a package)."""
    spec = importlib.util.spec_from_file_location("deploy_rank_rules", DEPLOY / "rank_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


rank_rules = _load_rank_rules()


def _load_lifecycle_rules() -> Any:
    spec = importlib.util.spec_from_file_location(
        "deploy_lifecycle_rules", DEPLOY / "lifecycle_rules.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


lifecycle_rules = _load_lifecycle_rules()

DATASOURCE: Json = {"type": "prometheus", "uid": "${datasource}"}
# Job-level and pod-level series carry all three identity labels; the exporter's own series
# carry only `provider` (and `target`).
JOB = 'provider=~"$provider", resource_pool=~"$resource_pool", job_id=~"$job"'
EXPORTER = 'provider=~"$provider"'
POD_KEY = "provider, job_id, pod"
POD_LEGEND = "{{job_id}}/{{pod}}"
GRID_WIDTH = 24


def query(expr: str, legend: str = "", ref: str = "A", *, instant: bool = False) -> Json:
    target: Json = {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend or "__auto",
        "refId": ref,
    }
    if instant:
        target.update({"format": "table", "instant": True, "range": False})
    else:
        target.update({"instant": False, "range": True})
    return target


def panel(
    kind: str,
    title: str,
    description: str,
    targets: list[Json],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    field_defaults: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    transformations: list[Json] | None = None,
    overrides: list[Json] | None = None,
) -> Json:
    defaults: Json = {"unit": unit, **(field_defaults or {})}
    result: Json = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": list(overrides or [])},
        "options": dict(options or {}),
        "gridPos": {"w": width, "h": height, "x": 0, "y": 0},
    }
    if transformations:
        result["transformations"] = transformations
    return result


def timeseries(title: str, description: str, targets: list[Json], **kw: Any) -> Json:
    options = {
        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return panel("timeseries", title, description, targets, options=options, **kw)


def ratio_timeseries(title: str, description: str, targets: list[Json], **kw: Any) -> Json:
    return timeseries(
        title, description, targets, unit="percentunit", field_defaults={"min": 0, "max": 1}, **kw
    )


def table(title: str, description: str, expr: str, *, hide: Iterable[str] = (), **kw: Any) -> Json:
    hidden = {name: True for name in ("Time", *hide)}
    organize = {"id": "organize", "options": {"excludeByName": hidden}}
    return panel(
        "table",
        title,
        description,
        [query(expr, instant=True)],
        transformations=[organize],
        options={"showHeader": True},
        **kw,
    )


def state_mapping(states: Mapping[int, tuple[str, str]]) -> Json:
    return {
        "mappings": [
            {
                "type": "value",
                "options": {
                    str(value): {"text": text, "color": color, "index": index}
                    for index, (value, (text, color)) in enumerate(states.items())
                },
            }
        ],
        "color": {"mode": "thresholds"},
        "thresholds": {
            "mode": "absolute",
            "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}],
        },
    }


def row(title: str, *, collapsed: bool = False) -> Json:
    """A row; a collapsed one holds its panels (`lay_out` moves them in), and Grafana runs
    their queries only when it is opened."""
    return {
        "type": "row",
        "title": title,
        "collapsed": collapsed,
        "panels": [],
        "gridPos": {"w": GRID_WIDTH, "h": 1, "x": 0, "y": 0},
    }


def selected(metric: str, extra: str = "") -> str:
    return f"{metric}{{{JOB}{extra}}}"


def send_receive(kind: str, unit_metric: str) -> list[Json]:
    """Two queries, send (A) and receive (B), of `training_pod_{kind}_{dir}_{unit_metric}`."""
    return [
        query(
            f"max by ({POD_KEY}) ({selected(f'training_pod_{kind}_{direction}_{unit_metric}')})",
            f"{POD_LEGEND} {label}",
            ref,
        )
        for ref, direction, label in (("A", "transmit", "send"), ("B", "receive", "receive"))
    ]


def or_zero(expr: str) -> str:
    """`expr`, or 0 per provider while the counter has no series yet (nothing counted)."""
    return f"({expr}) or (sum by (provider) (training_exporter_series{{{EXPORTER}}}) * 0)"


def job_panels() -> list[Json]:
    job_key = "provider, resource_pool, queue, job_id"
    status = f"max by ({job_key}, status) ({selected('training_job_status')})"
    info_labels = "job_name, job_type, user_id, priority"
    info = f"max by (provider, job_id, {info_labels}) (training_job_info{{{JOB}}})"
    return [
        row("Jobs"),
        panel(
            "stat",
            "Jobs by status",
            "Number of jobs in each status (AIHC job status).",
            [query(f"count by (status) ({status} == 1)", "{{status}}")],
            width=8,
            height=6,
            options={"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name"},
        ),
        table(
            "Jobs",
            "Current status of each job, with its descriptive labels from training_job_info.",
            f"({status} == 1) * on(provider, job_id) group_left({info_labels}) {info}",
            hide=("Value",),
            width=16,
            height=6,
        ),
        table(
            "Pods",
            "Current phase of each pod.",
            f"max by ({POD_KEY}, phase) ({selected('training_pod_phase')}) == 1",
            hide=("Value",),
        ),
        table(
            "Pod placement",
            "Replica type, node and pod IP of each pod (training_pod_info).",
            f"max by ({POD_KEY}, replica_type, node, pod_ip) ({selected('training_pod_info')})",
            hide=("Value",),
        ),
        timeseries(
            "Pod restarts",
            "Container restarts of each pod, as reported by the provider.",
            [query(f"max by ({POD_KEY}) ({selected('training_pod_restarts')})", POD_LEGEND)],
            width=24,
        ),
    ]


def gpu_panels() -> list[Json]:
    gpu_util = selected("training_pod_gpu_utilization_ratio")
    per_card = f"{POD_LEGEND} {{{{gpu}}}}"
    return [
        row("GPU"),
        ratio_timeseries(
            "GPU utilisation by job",
            "Mean GPU utilisation over the job's pods (and cards, where the provider reports "
            "them).",
            [query(f"avg by (provider, job_id) ({gpu_util})", "{{job_id}}")],
        ),
        ratio_timeseries(
            "GPU utilisation per pod and card",
            "Latest GPU utilisation sample per pod; Alaya reports one series per card (gpu).",
            [query(gpu_util, per_card)],
        ),
        ratio_timeseries(
            "GPU memory utilisation per pod and card",
            "Latest GPU memory utilisation sample per pod or card.",
            [query(selected("training_pod_gpu_memory_utilization_ratio"), per_card)],
        ),
        ratio_timeseries(
            "Tensor pipe active",
            "Fraction of time the GPU tensor pipes were active (AIHC GpuPipeTensorUsage).",
            [query(selected("training_pod_gpu_tensor_pipe_active_ratio"), POD_LEGEND)],
        ),
        timeseries(
            "GPU power",
            "GPU power draw per pod.",
            [query(selected("training_pod_gpu_power_watts"), POD_LEGEND)],
            unit="watt",
        ),
        timeseries(
            "GPU temperature",
            "GPU temperature per pod.",
            [query(selected("training_pod_gpu_temperature_celsius"), POD_LEGEND)],
            unit="celsius",
        ),
    ]


def interconnect_panels() -> list[Json]:
    healthy = f"min by ({POD_KEY}) ({selected('training_pod_rdma_healthy')})"
    return [
        row("RDMA, NVLink and PCIe"),
        timeseries(
            "RDMA throughput",
            "RDMA send and receive rate per pod, as computed by the provider.",
            send_receive("rdma", "bytes_per_second"),
            unit="Bps",
        ),
        timeseries(
            "NVLink throughput",
            "NVLink send and receive rate per pod.",
            send_receive("nvlink", "bytes_per_second"),
            unit="Bps",
        ),
        timeseries(
            "PCIe throughput",
            "PCIe send and receive rate per pod.",
            send_receive("pcie", "bytes_per_second"),
            unit="Bps",
        ),
        timeseries(
            "RDMA errors",
            "RDMA send and receive errors per second, per pod.",
            send_receive("rdma", "errors_per_second"),
            unit="short",
        ),
        panel(
            "state-timeline",
            "RDMA health",
            "RDMA health reported by the provider: healthy (1) or unhealthy (0).",
            [query(healthy, POD_LEGEND)],
            unit="none",
            width=24,
            field_defaults=state_mapping({1: ("healthy", "green"), 0: ("unhealthy", "red")}),
            options={"showValue": "never", "mergeValues": True},
        ),
    ]


def host_panels() -> list[Json]:
    return [
        row("CPU, memory and disk"),
        ratio_timeseries(
            "CPU utilisation",
            "CPU utilisation per pod.",
            [query(selected("training_pod_cpu_utilization_ratio"), POD_LEGEND)],
        ),
        timeseries(
            "CPU used",
            "CPU used per pod, in cores.",
            [query(selected("training_pod_cpu_used_cores"), POD_LEGEND)],
            unit="short",
        ),
        ratio_timeseries(
            "Memory utilisation",
            "Memory utilisation per pod.",
            [query(selected("training_pod_memory_utilization_ratio"), POD_LEGEND)],
        ),
        timeseries(
            "Memory used",
            "Memory used per pod.",
            [query(selected("training_pod_memory_used_bytes"), POD_LEGEND)],
            unit="bytes",
        ),
        timeseries(
            "Disk throughput",
            "Disk read and write rate per pod.",
            [
                query(selected("training_pod_disk_read_bytes_per_second"), f"{POD_LEGEND} read"),
                query(
                    selected("training_pod_disk_write_bytes_per_second"),
                    f"{POD_LEGEND} write",
                    "B",
                ),
            ],
            unit="Bps",
            width=24,
        ),
    ]


def event_panels() -> list[Json]:
    warnings = selected("training_job_events_total", ', event_type="Warning"')
    last = selected("training_job_last_event_timestamp_seconds", ', event_type="Warning"')
    return [
        row("Events"),
        timeseries(
            "Warning events",
            "Warning events per job and reason (AIHC job events), counted per interval.",
            [
                query(
                    f"sum by (provider, job_id, reason) (increase({warnings}[$__rate_interval]))",
                    "{{job_id}} {{reason}}",
                )
            ],
            unit="short",
            field_defaults={"custom": {"drawStyle": "bars", "fillOpacity": 60}},
        ),
        table(
            "Latest warning events",
            "When each job last had a Warning event of each reason.",
            f"max by (provider, job_id, reason) ({last}) * 1000",
            unit="dateTimeAsIso",
        ),
    ]


JOB_KEY = "provider, resource_pool, queue, job_id"
QUEUE_KEY = "provider, resource_pool, queue"
POOL_SELECTED = 'provider=~"$provider", resource_pool=~"$resource_pool"'


def _ended_in_range(negate: bool = False) -> str:
    """Jobs that finished within the dashboard's range (or, negated, before it)."""
    finished = f"max by ({JOB_KEY}) ({selected('training_job_finished_timestamp_seconds')})"
    return f"(time() - {finished} {'>=' if negate else '<'} $__range_s)"


def lifecycle_panels() -> list[Json]:
    waits = f"training_queue:queue_wait_seconds:quantile{{{POOL_SELECTED}"
    waiting = f"max by ({JOB_KEY}) ({selected('training_job:queue_wait_seconds:waiting')})"
    info = f"max by (provider, job_id, job_name) ({selected('training_job_info')})"
    classes = f"max by ({JOB_KEY}, class) ({selected('training_job_failure_class')})"
    failed_hours = selected("training_job:gpu_hours_failed:total")
    restart_hours = selected("training_job:gpu_hours_restarting:total")
    return [
        row("Lifecycle"),
        timeseries(
            "Queue wait by queue",
            "Median and 0.9 quantile of the waits (creation to first Running) of the jobs each "
            "queue started in the last 24 hours, each job once.",
            [
                query(
                    f'max by ({QUEUE_KEY}) ({waits}, quantile="{q}"}})',
                    f"{{{{resource_pool}}}}/{{{{queue}}}} p{name}",
                    ref,
                )
                for ref, q, name in (("A", "0.5", "50"), ("B", "0.9", "90"))
            ],
            unit="s",
        ),
        table(
            "Jobs waiting now",
            "Jobs that have not run yet, longest wait first (TrainingJobPendingTooLong fires past "
            "3 x their queue's 0.9 quantile, and at least 30 minutes).",
            f"sort_desc({waiting} * on(provider, job_id) group_left(job_name) {info})",
            unit="s",
        ),
        timeseries(
            "Failures by class",
            "Jobs of each failure class that finished in the hour before each point (the "
            "classes are in docs/metrics.md; TrainingFailureBurst fires at 3 of one class in one "
            "queue, user_exit aside).",
            [
                query(
                    f"sum by (class) (training_queue:jobs_failed:count{{{POOL_SELECTED}}})",
                    "{{class}}",
                )
            ],
            width=8,
            field_defaults={"custom": {"drawStyle": "bars", "fillOpacity": 60}},
        ),
        table(
            "Failed jobs by queue and class",
            "Jobs that failed within the dashboard's time range, per queue and class.",
            f"count by ({QUEUE_KEY}, class) (\n  {classes}\n"
            f"  and on({JOB_KEY}) {_ended_in_range()}\n)",
            width=8,
        ),
        table(
            "GPU-hours lost by failure class",
            "GPUs x running time of the jobs that failed within the time range, per class.",
            f"sum by (class) (\n  {failed_hours}\n"
            f"    * on({JOB_KEY}) group_left(class) {classes}\n"
            f"  and on({JOB_KEY}) {_ended_in_range()}\n)",
            unit="short",
            width=8,
        ),
        panel(
            "table",
            "GPU-hours lost by queue",
            "Per queue, over the time range: GPUs x running time of the jobs that failed, and "
            "GPUs x time restarting of the jobs that ran (restart time only: the work redone "
            "since a checkpoint is not in the APIs).",
            [
                query(
                    f"sum by ({QUEUE_KEY}) ({failed_hours} and on({JOB_KEY}) {_ended_in_range()})",
                    ref="A",
                    instant=True,
                ),
                query(
                    f"sum by ({QUEUE_KEY}) (\n  {restart_hours}\n"
                    f"    unless on({JOB_KEY}) {_ended_in_range(negate=True)}\n)",
                    ref="B",
                    instant=True,
                ),
            ],
            transformations=[
                {"id": "merge", "options": {}},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True},
                        "renameByName": {
                            "Value #A": "failed GPU-hours",
                            "Value #B": "restarting GPU-hours",
                        },
                    },
                },
            ],
            options={"showHeader": True},
        ),
        timeseries(
            "GPU-hours lost in the last day by queue",
            "Per queue: the GPU-hours of the jobs that failed in the 24 hours before each point, "
            "and the GPU-hours of restarts of the jobs that ran in them.",
            [
                query(
                    f"training_queue:gpu_hours_failed:24h{{{POOL_SELECTED}}}",
                    "{{resource_pool}}/{{queue}} failed",
                ),
                query(
                    f"training_queue:gpu_hours_restarting:24h{{{POOL_SELECTED}}}",
                    "{{resource_pool}}/{{queue}} restarting",
                    "B",
                ),
            ],
        ),
    ]


RANKED_LEGEND = "{{pod}} {{gpu}}"


def band_panel(signal: Any) -> Json:
    """One signal of the chosen job: each Running pod's (or card's) series, the job's median
    and its band (K scaled deviations either side), as ranks.yaml computes them."""
    short = signal.short
    median = f"training_job:{short}:median{{{JOB}}}"
    spread = f"training_job:{short}:spread{{{JOB}}}"
    width = rank_rules.number(round(rank_rules.K / rank_rules.MAD_SCALE, 4))
    unit = {"ratio": "percentunit", "watts": "watt", "celsius": "celsius"}.get(
        short.rsplit("_", 1)[-1], "Bps"
    )
    dashed = {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}
    return timeseries(
        f"{signal.name.replace('_', ' ').capitalize()} against the job's band",
        f"{signal.metric} of each Running pod (card) of the chosen job, its median (dashed) "
        f"and the band of {rank_rules.number(rank_rules.K)} robust deviations around it: "
        "a series outside for 10 minutes is a slow rank or a throttled card. Jobs of one "
        "pod have no band.",
        [
            query(f"training_pod:{short}:ranked{{{JOB}}}", f"{{{{job_id}}}} {RANKED_LEGEND}"),
            query(median, "{{job_id}} median", "B"),
            query(f"{median} + {width} * {spread}", "{{job_id}} band", "C"),
            query(f"{median} - {width} * {spread}", "{{job_id}} band", "D"),
        ],
        unit=unit,
        width=8,
        overrides=[
            {"matcher": {"id": "byFrameRefID", "options": ref}, "properties": [dashed]}
            for ref in ("B", "C", "D")
        ],
    )


def rank_panels() -> list[Json]:
    k = rank_rules.number(rank_rules.K)
    score = f"training_pod:robust_score{{{JOB}}}"
    outliers = {
        "color": {"mode": "thresholds"},
        "thresholds": {
            "mode": "absolute",
            "steps": [
                {"color": "red", "value": None},
                {"color": "green", "value": -rank_rules.K},
                {"color": "red", "value": rank_rules.K},
            ],
        },
        "custom": {"cellOptions": {"type": "color-background"}},
    }
    return [
        # Collapsed: opened with every job chosen it would load every pod's score of every
        # signal (28k-112k series at 250 jobs); its title says to choose one first.
        row("Ranks (choose one job)", collapsed=True),
        table(
            "Outliers now",
            f"Every pod (card) and signal of the chosen jobs more than {k} robust deviations "
            "from its job's median (modified z-score: 0.6745 x (value - median) / MAD, the "
            "MAD floored): red, lower or higher than its peers.",
            f"sort_desc(abs({score}) > {k})",
            hide=("__name__", "instance", "job"),
            unit="none",
            field_defaults=outliers,
            width=8,
        ),
        timeseries(
            "Robust scores",
            f"Each pod's (card's) score per signal; outside +-{k} is an outlier.",
            [query(score, f"{{{{job_id}}}} {RANKED_LEGEND} {{{{signal}}}}")],
            unit="none",
            width=16,
        ),
        *(band_panel(signal) for signal in rank_rules.SIGNALS),
    ]


def gpu_hour_panels() -> list[Json]:
    pool = 'provider=~"$provider", resource_pool=~"$resource_pool"'
    present = 'training_provider:data:present{provider=~"$provider"}'

    def hours(level: str, what: str, selector: str, by: str) -> str:
        # The mean over the evaluations that had data, times the range: a gap in evaluation
        # or scraping does not lower the figure (the coverage panel shows how much is gap).
        return (
            f"sum by ({by}) (sum_over_time(training_{level}:gpus_{what}:count{{{selector}}}"
            f"[$__range]) / on(provider) group_left count_over_time({present}[$__range]))"
            " * $__range_s / 3600"
        )

    job_key = "provider, resource_pool, queue, job_id"
    return [
        row("Idle GPU-hours"),
        panel(
            "table",
            "Jobs wasting the most GPU-hours",
            "GPU-hours each job held over the dashboard's time range, and how many of them its "
            f"GPUs were under {rank_rules.IDLE_UTILIZATION:.0%} busy: the ten that wasted the "
            "most. A pod reported as one average counts as the GPUs its job gives each pod "
            "(training_job_gpus_per_pod).",
            [
                query(f"topk(10, {hours('job', 'idle', JOB, job_key)})", ref="A", instant=True),
                query(hours("job", "allocated", JOB, job_key), ref="B", instant=True),
            ],
            unit="short",
            width=12,
            transformations=[
                {"id": "merge", "options": {}},
                {"id": "filterByValue", "options": _only_top("Value #A")},
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True},
                        "renameByName": {
                            "Value #A": "idle GPU-hours",
                            "Value #B": "GPU-hours",
                        },
                    },
                },
                {"id": "sortBy", "options": {"sort": [{"field": "idle GPU-hours", "desc": True}]}},
            ],
            options={"showHeader": True},
        ),
        timeseries(
            "Idle GPUs by queue",
            f"GPUs under {rank_rules.IDLE_UTILIZATION:.0%} busy in each queue's Running pods.",
            [
                query(
                    "sum by (provider, resource_pool, queue) "
                    f"(training_queue:gpus_idle:count{{{pool}}})",
                    "{{resource_pool}}/{{queue}}",
                )
            ],
            width=12,
        ),
        timeseries(
            "Idle and allocated GPUs by resource pool",
            "GPUs held by Running pods in each pool, and how many of them are idle.",
            [
                query(
                    "sum by (provider, resource_pool) "
                    f"(training_resource_pool:gpus_allocated:count{{{pool}}})",
                    "{{provider}} {{resource_pool}} allocated",
                ),
                query(
                    "sum by (provider, resource_pool) "
                    f"(training_resource_pool:gpus_idle:count{{{pool}}})",
                    "{{provider}} {{resource_pool}} idle",
                    "B",
                ),
            ],
            width=12,
        ),
        table(
            "Idle GPU-hours by queue",
            "GPU-hours idle in each queue over the dashboard's time range.",
            hours("queue", "idle", pool, "provider, resource_pool, queue"),
            width=8,
        ),
        panel(
            "stat",
            "GPU-hour coverage",
            "Share of the time range's rule evaluations that had the exporter's series: the "
            "GPU-hours above rest on it (a gap counts like the rest of the range). Under 100 %: "
            "Prometheus restarted or missed evaluations, or no exporter was scraped.",
            [
                query(
                    f"count_over_time({present}[$__range]) / ($__range_s / "
                    f"{rank_rules.number(rank_rules.PRODUCTION.interval)})",
                    "{{provider}}",
                )
            ],
            unit="percentunit",
            width=4,
            options={"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name"},
        ),
    ]


def _only_top(field: str) -> Json:
    """Keep the rows the topk query (`field`) returned."""
    return {
        "filters": [{"fieldName": field, "config": {"id": "isNotNull", "options": {}}}],
        "match": "any",
        "type": "include",
    }


def exporter_panels() -> list[Json]:
    up = f"min by (provider, target) (training_exporter_up{{{EXPORTER}}})"
    last_success = f"training_exporter_last_success_timestamp_seconds{{{EXPORTER}}}"
    buckets = f"training_exporter_poll_duration_seconds_bucket{{{EXPORTER}}}"
    required = f"training_exporter_budget_required_requests_per_second{{{EXPORTER}}}"
    budget = f"training_exporter_budget_requests_per_second{{{EXPORTER}}}"
    tier_interval = f"training_exporter_tier_interval_seconds{{{EXPORTER}}}"

    def rate_by_provider(metric: str) -> str:
        return f"sum by (provider) (rate({metric}{{{EXPORTER}}}[$__rate_interval]))"

    return [
        row("Exporter"),
        panel(
            "stat",
            "Targets up",
            "Whether each target's last round succeeded: its job list and every call that "
            "ended since the round before. One failed call of any tier makes it 0 until the "
            "end of a round without one.",
            [query(up, "{{provider}}/{{target}}")],
            unit="none",
            width=8,
            height=6,
            field_defaults=state_mapping({1: ("up", "green"), 0: ("down", "red")}),
            options={"reduceOptions": {"calcs": ["lastNotNull"]}, "textMode": "value_and_name"},
        ),
        timeseries(
            "Data age",
            "Seconds since the end of each target's last round without a failed call. The "
            "fast tier's data is about this old; a slower tier's can be up to its interval "
            "older (Tier intervals).",
            [
                query(
                    f"time() - max by (provider, target) ({last_success})",
                    "{{provider}}/{{target}}",
                )
            ],
            unit="s",
            width=8,
            height=6,
        ),
        timeseries(
            "Job list duration (p90)",
            "90th percentile of how long reading a target's job list takes at the start of "
            "each round; the per-job calls are spread over the tiers' intervals after it.",
            [
                query(
                    "histogram_quantile(0.9, sum by (provider, target, le) "
                    f"(rate({buckets}[$__rate_interval])))",
                    "{{provider}}/{{target}}",
                )
            ],
            unit="s",
            width=8,
            height=6,
        ),
        timeseries(
            "Request budget",
            "Requests per second each target's refresh tiers need at their configured "
            "intervals for the current jobs and pods (required), and its "
            "limits.requests_per_second (budget; none when unlimited). Above the budget, "
            "slower tiers are read less often than configured; with shards, the busiest "
            "replica's.",
            [
                query(
                    f"max by (provider, target) ({required})",
                    "{{provider}}/{{target}} required",
                ),
                query(
                    f"max by (provider, target) ({budget})",
                    "{{provider}}/{{target}} budget",
                    "B",
                ),
            ],
            unit="reqps",
            # The budget is a limit, not a measurement: dashed, like a threshold.
            overrides=[
                {
                    "matcher": {"id": "byFrameRefID", "options": "B"},
                    "properties": [
                        {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}}
                    ],
                }
            ],
        ),
        timeseries(
            "Tier intervals",
            "Effective interval of each refresh tier: the configured one, or longer when "
            "the plan needs more than the budget (slowest tiers stretch first). A tier "
            "without items still shows its interval.",
            [
                query(
                    f"max by (provider, target, tier) ({tier_interval})",
                    "{{provider}}/{{target}} {{tier}}",
                )
            ],
            unit="s",
        ),
        timeseries(
            "Provider API requests",
            "Provider API requests per second by target (one account or pool) and HTTP status "
            "(or timeout / error / too_large): the API cost of the exporter, per account.",
            [
                query(
                    "sum by (provider, target, code) (rate(training_exporter_api_requests_total"
                    f"{{{EXPORTER}}}[$__rate_interval]))",
                    "{{provider}}/{{target}} {{code}}",
                )
            ],
            unit="reqps",
        ),
        timeseries(
            "Retries and dropped values",
            "Provider API requests retried, and upstream values dropped because they were not "
            "finite numbers, per second.",
            [
                query(
                    or_zero(rate_by_provider("training_exporter_api_retries_total")),
                    "{{provider}} retries",
                ),
                query(
                    or_zero(rate_by_provider("training_exporter_dropped_values_total")),
                    "{{provider}} dropped",
                    "B",
                ),
            ],
            unit="short",
        ),
        timeseries(
            "Series exported",
            "Series the exporter currently exports, per provider.",
            [query(f"sum by (provider) (training_exporter_series{{{EXPORTER}}})", "{{provider}}")],
        ),
        timeseries(
            "Stale parts, left out and discovery errors",
            "Parts of jobs served from an earlier read because their last read failed; jobs "
            "left out because the target reached max_jobs or max_series; samples left out "
            "because another target exported the same series (duplicates); rounds whose job "
            "list could not be read or trusted (discovery errors: the last good list is used).",
            [
                query(
                    f"sum by (provider, target) (training_exporter_stale_parts{{{EXPORTER}}})",
                    "{{provider}}/{{target}} stale parts",
                ),
                query(
                    "sum by (provider, target) (increase("
                    f"training_exporter_jobs_left_out_total{{{EXPORTER}}}[$__rate_interval]))",
                    "{{provider}}/{{target}} jobs left out",
                    "B",
                ),
                query(
                    f"sum by (provider) (training_exporter_duplicate_series{{{EXPORTER}}})",
                    "{{provider}} duplicate series",
                    "C",
                ),
                query(
                    "sum by (provider, target) (increase("
                    f"training_exporter_discovery_errors_total{{{EXPORTER}}}[$__rate_interval]))",
                    "{{provider}}/{{target}} discovery errors",
                    "D",
                ),
            ],
        ),
    ]


def variable(name: str, label: str, expr: str) -> Json:
    """A multi-value query variable over `label_values(...)` whose All matches empty values."""
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": expr,
        "query": {"query": expr, "refId": f"{name}-variable"},
        "refresh": 2,
        "includeAll": True,
        # `.*`, not Grafana's default list of values: Alaya series have no resource_pool, and
        # a job that appears after the page loaded must still show.
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "regex": "",
        "hide": 0,
    }


# The job list's info series, and the pods' for jobs a provider lists no info for (Alaya's
# configured jobs have pods but no training_job_info).
INFO_SERIES = '__name__=~"training_job_info|training_pod_info"'


def templating() -> Json:
    return {
        "list": [
            {
                "type": "datasource",
                "name": "datasource",
                "label": "Data source",
                "query": "prometheus",
                "current": {},
                "refresh": 1,
                "regex": "",
                "hide": 0,
            },
            variable("provider", "Provider", f"label_values({{{INFO_SERIES}}}, provider)"),
            variable(
                "resource_pool",
                "Resource pool",
                f'label_values({{{INFO_SERIES}, provider=~"$provider"}}, resource_pool)',
            ),
            variable(
                "job",
                "Job",
                f"label_values({{{INFO_SERIES}, "
                'provider=~"$provider", resource_pool=~"$resource_pool"}, job_id)',
            ),
        ]
    }


def lay_out(panels: list[Json]) -> list[Json]:
    """Give panels ids and grid positions: left to right, wrapping at the grid width. The
    panels after a collapsed row go into it, at the places they take when it is opened, and
    what follows starts right under the closed row."""
    x = y = row_height = 0
    shown: list[Json] = []
    closed: Json | None = None
    for panel_id, item in enumerate(panels, start=1):
        pos = item["gridPos"]
        if item["type"] == "row" and closed is not None:
            x, y, row_height = 0, closed["gridPos"]["y"] + 1, 0
        if x + pos["w"] > GRID_WIDTH or item["type"] == "row":
            x, y = 0, y + row_height
            row_height = 0
        item["id"] = panel_id
        pos.update(x=x, y=y)
        x += pos["w"]
        row_height = max(row_height, pos["h"])
        if item["type"] == "row":
            x, y, row_height = 0, y + pos["h"], 0
            closed = item if item["collapsed"] else None
        if closed is not None and item is not closed:
            closed["panels"].append(item)
        else:
            shown.append(item)
    return shown


def dashboard() -> Json:
    panels = [
        *job_panels(),
        *gpu_panels(),
        *interconnect_panels(),
        *host_panels(),
        *event_panels(),
        *lifecycle_panels(),
        *rank_panels(),
        *gpu_hour_panels(),
        *exporter_panels(),
    ]
    return {
        "uid": "training-jobs",
        "title": "Training jobs",
        "description": "GPU training jobs on Baidu AIHC and Alaya NeW Cloud, from "
        "training-job-exporter.",
        "tags": ["training-job-exporter", "gpu", "training"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": templating(),
        "panels": lay_out(panels),
    }


def rendered_files() -> dict[Path, str]:
    """Every generated file and the text it must hold."""
    dashboard_text = json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"
    alerts_text = ALERTS_PATH.read_text(encoding="utf-8")
    ranks_text = rank_rules.text()
    lifecycle_text = lifecycle_rules.text()
    return {
        DASHBOARD_PATH: dashboard_text,
        CHART_FILES / DASHBOARD_PATH.name: dashboard_text,
        CHART_FILES / ALERTS_PATH.name: alerts_text,
        RANKS_PATH: ranks_text,
        CHART_FILES / RANKS_PATH.name: ranks_text,
        LIFECYCLE_PATH: lifecycle_text,
        CHART_FILES / LIFECYCLE_PATH.name: lifecycle_text,
        CHART_FILES / EXAMPLE_CONFIG_PATH.name: EXAMPLE_CONFIG_PATH.read_text(encoding="utf-8"),
    }


def out_of_date() -> list[Path]:
    return [
        path
        for path, text in rendered_files().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files")
    args = parser.parse_args(argv)
    if args.check:
        stale = out_of_date()
        for path in stale:
            print(
                f"{path.relative_to(DEPLOY.parent)} is out of date: run python deploy/generate.py",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path, text in rendered_files().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
