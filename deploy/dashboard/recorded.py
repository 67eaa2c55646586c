"""The panels over the series ranks.yaml and lifecycle.yaml record: queue waits, failures and
the GPU-hours they lost; each pod against its job's peers; idle GPU-hours. They take the rank
rules' module (`rank_rules`) for the numbers they draw (K, the idle threshold, the signals,
the evaluation interval), so a panel's band and its rule cannot disagree.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from .blocks import JOB, Json, panel, query, row, selected, table, timeseries

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


def band_panel(rank_rules: ModuleType, signal: Any) -> Json:
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


def rank_panels(rank_rules: ModuleType) -> list[Json]:
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
        *(band_panel(rank_rules, signal) for signal in rank_rules.SIGNALS),
    ]


def gpu_hour_panels(rank_rules: ModuleType) -> list[Json]:
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
