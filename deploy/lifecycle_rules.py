"""The lifecycle rules (`deploy/prometheus/lifecycle.yaml`): queue waits, failures by class,
GPU-hours lost to failures and restarts, and their alerts, built from parameters.

Everything here is computed from per-job series the exporter derives from the provider's own
data (`training_job_queue_wait_seconds`, `training_job_started_timestamp_seconds`,
`training_job_failure_class`, `training_job_restarting_seconds`, ...), at each evaluation, over
the jobs whose start or end falls in a window: each job counts once, whichever exporter or
shard exported it, and no figure depends on how many evaluations Prometheus made (a restart of
Prometheus or of the exporter changes nothing). Jobs a provider no longer lists drop out.

- Queue wait: per queue and per pool, the 0.5, 0.9 and 0.99 quantiles of the waits of the
  jobs that first ran in the last `wait_window` (a day), and the jobs waiting now.
- `TrainingJobPendingTooLong`: a job has waited more than `PENDING_FACTOR` times its queue's
  0.9 quantile, and at least `pending_floor`; in a queue where no job started in the window,
  more than `pending_no_history`.
- Failures: per queue and class, the jobs that failed in the last `burst_window`.
  `TrainingFailureBurst`: `BURST` or more of one class in one queue, but for `user_exit` (one
  user's script failing again is not the platform's).
- `TrainingJobRestartLoop`: a job's pods restarted, or the job went Restarting, `LOOP_RESTARTS`
  times or more in the last `loop_window`.
- GPU-hours lost: per job, its GPUs (replicas x `training_job_gpus_per_pod`) times its running
  time if it failed, and times its time restarting; per queue and pool, summed over the jobs
  that ended in the last `cost_window` (a day), and, for restarts, those still running.

`rules(scale)` with `PRODUCTION` is the shipped file; tests build it on a shorter timescale.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _load_rank_rules() -> Any:
    """rank_rules.py beside this file, for its durations, numbers and YAML (loaded by path:
    generate.py runs as a script, not as a package)."""
    name = "deploy_rank_rules"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "rank_rules.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ranks = _load_rank_rules()
duration, number = ranks.duration, ranks.number

JOB = ranks.JOB
QUEUE = "provider, resource_pool, queue"
POOL = "provider, resource_pool"
QUANTILES = (0.5, 0.9, 0.99)
# A job waits too long past this many times its queue's 0.9 quantile.
PENDING_FACTOR = 3
# This many failures of one class in one queue within the window is a burst.
BURST = 3
# Classes that make no burst: the user's own code.
NO_BURST = ("user_exit",)
# This many restarts within the window is a loop.
LOOP_RESTARTS = 3


@dataclass(frozen=True)
class Timescale:
    """Every duration of the rules, in seconds."""

    interval: float = 60
    wait_window: float = 86400
    pending_floor: float = 1800
    pending_no_history: float = 14400
    # Two readings of the job list (fast tier) and the margin: rank_rules.Timescale.covering.
    pending_for: float = 360
    burst_window: float = 3600
    burst_for: float = 360
    loop_window: float = 3600
    # Two readings of the pods (medium tier) and the margin.
    loop_for: float = 600
    cost_window: float = 86400

    def scaled(self, factor: float) -> Timescale:
        return Timescale(*(getattr(self, f) * factor for f in self.__dataclass_fields__))


PRODUCTION = Timescale()


def _ended_within(window: float) -> str:
    return f"(time() - max by ({JOB}) (training_job_finished_timestamp_seconds) < {number(window)})"


def _waits(scale: Timescale) -> list[dict[str, Any]]:
    started = (
        f"(max by ({JOB}) (training_job_started_timestamp_seconds)"
        f" > time() - {number(scale.wait_window)})"
    )
    rules: list[dict[str, Any]] = [
        {
            "record": "training_job:queue_wait_seconds:max",
            "expr": f"max by ({JOB}) (training_job_queue_wait_seconds)",
        },
        {
            # Still waiting: a wait, and no first Running yet.
            "record": "training_job:queue_wait_seconds:waiting",
            "expr": "training_job:queue_wait_seconds:max\n"
            f"  unless on({JOB}) training_job_started_timestamp_seconds",
        },
        {
            "record": "training_queue:jobs_waiting:count",
            "expr": f"count by ({QUEUE}) (training_job:queue_wait_seconds:waiting)",
        },
    ]
    for level, by in (("queue", QUEUE), ("resource_pool", POOL)):
        for q in QUANTILES:
            rules.append(
                {
                    "record": f"training_{level}:queue_wait_seconds:quantile",
                    "expr": f"quantile by ({by}) (\n  {number(q)},\n"
                    f"  training_job:queue_wait_seconds:max and on({JOB}) {started}\n)",
                    "labels": {"quantile": number(q)},
                }
            )
    return rules


def _threshold(scale: Timescale) -> dict[str, Any]:
    p90 = 'training_queue:queue_wait_seconds:quantile{quantile="0.9"}'
    return {
        # How long a job of the queue may wait before it is far longer than usual.
        "record": "training_queue:queue_wait_seconds:threshold",
        "expr": f"clamp_min({PENDING_FACTOR} * max by ({QUEUE}) ({p90}),"
        f" {number(scale.pending_floor)})\n"
        f"  or on({QUEUE})\n"
        f"(0 * training_queue:jobs_waiting:count + {number(scale.pending_no_history)})",
    }


def _failures(scale: Timescale) -> list[dict[str, Any]]:
    return [
        {
            "record": "training_queue:jobs_failed:count",
            "expr": f"count by ({QUEUE}, class) (\n"
            f"  max by ({JOB}, class) (training_job_failure_class)\n"
            f"    and on({JOB}) {_ended_within(scale.burst_window)}\n)",
        },
    ]


def _restarts(scale: Timescale) -> list[dict[str, Any]]:
    window = duration(scale.loop_window)
    pods = (
        f"sum by ({JOB}) (\n"
        f"    max_over_time(training_pod_restarts[{window}])"
        f" - min_over_time(training_pod_restarts[{window}])\n  )"
    )
    # Each time into Restarting and out again is two changes of its state series.
    status = (
        f"max by ({JOB}) (\n"
        f'    ceil(changes(training_job_status{{status="Restarting"}}[{window}]) / 2)\n  )'
    )
    return [
        {
            "record": "training_job:restarts:count",
            "expr": f"max by ({JOB}) (\n"
            f'  label_replace({pods}, "seen_in", "pods", "", "")\n'
            f'  or label_replace({status}, "seen_in", "status", "", "")\n)',
        }
    ]


def _cost(scale: Timescale) -> list[dict[str, Any]]:
    gpus = "training_job:gpus:count"
    ran = (
        f"max by ({JOB}) (training_job_running_seconds)\n"
        f"  or on({JOB})\n"
        f"(max by ({JOB}) (training_job_finished_timestamp_seconds)"
        f" - max by ({JOB}) (training_job_started_timestamp_seconds))"
    )
    failed = f'(max by ({JOB}) (training_job_status{{status=~"Failed|Abnormal"}}) == 1)'
    ended = _ended_within(scale.cost_window)
    old = (
        f"(time() - max by ({JOB}) (training_job_finished_timestamp_seconds)"
        f" >= {number(scale.cost_window)})"
    )
    rules: list[dict[str, Any]] = [
        {
            "record": gpus,
            "expr": f"max by ({JOB}) (training_job_replicas)\n"
            f"  * on({JOB}) max by ({JOB}) (training_job_gpus_per_pod)",
        },
        {
            "record": "training_job:gpu_hours_failed:total",
            "expr": f"{gpus} * on({JOB}) (\n{ran}\n) / 3600\n  and on({JOB}) {failed}",
        },
        {
            "record": "training_job:gpu_hours_restarting:total",
            "expr": f"{gpus} * on({JOB}) max by ({JOB}) (training_job_restarting_seconds) / 3600",
        },
    ]
    # Named for production's window whatever the timescale, so dashboards read the same names.
    window = duration(PRODUCTION.cost_window)
    for level, by in (("queue", QUEUE), ("resource_pool", POOL)):
        rules += [
            {
                "record": f"training_{level}:gpu_hours_failed:{window}",
                "expr": f"sum by ({by}) (\n  training_job:gpu_hours_failed:total"
                f" and on({JOB}) {ended}\n)",
            },
            {
                "record": f"training_{level}:gpu_hours_restarting:{window}",
                "expr": f"sum by ({by}) (\n  training_job:gpu_hours_restarting:total"
                f" unless on({JOB}) {old}\n)",
            },
        ]
    return rules


WHERE = "{{ $labels.job_id }} ({{ $labels.provider }}, queue {{ $labels.queue }})"


def _alerts(scale: Timescale) -> list[dict[str, Any]]:
    burst = ", ".join(f'class!="{c}"' for c in NO_BURST)
    return [
        {
            "alert": "TrainingJobPendingTooLong",
            "expr": "training_job:queue_wait_seconds:waiting\n"
            f"  > on({QUEUE}) group_left\n"
            "training_queue:queue_wait_seconds:threshold",
            "for": duration(scale.pending_for),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Training job {{ $labels.job_id }} has waited far longer than its"
                " queue usually does",
                "description": f"Job {WHERE} has waited {{{{ $value | humanizeDuration }}}} for"
                f" its first Running: more than {PENDING_FACTOR} times the 0.9 quantile of the"
                f" waits of the jobs its queue started in the last {duration(scale.wait_window)}"
                f" (and at least {duration(scale.pending_floor)}; "
                f"{duration(scale.pending_no_history)} in a queue that started none).",
                "runbook": "Dashboard row Lifecycle: the queue's waits and its waiting jobs."
                " The job's Warning events (FailedScheduling: which resource is short), the"
                " queue's quota and the pool's free GPUs; a job asking for more GPUs a pod"
                " than any node has never starts: resubmit it smaller.",
            },
        },
        {
            "alert": "TrainingJobRestartLoop",
            "expr": f"training_job:restarts:count >= {LOOP_RESTARTS}",
            "for": duration(scale.loop_for),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Training job {{ $labels.job_id }} keeps restarting",
                "description": f"Job {WHERE} restarted {{{{ $value | humanize }}}} times in the"
                f" last {duration(scale.loop_window)} (its pods' restart counts, or its status"
                " going Restarting): each restart loses the GPU-hours since its last"
                " checkpoint and the time to start again.",
                "runbook": "The pods' last exit reason and the job's Warning events: an OOM"
                " (raise memory or shrink the batch), an NCCL error (a bad node or NIC: cordon"
                " it), a crash in the user's code (stop the job and tell its owner). Fault"
                " tolerance that restarts a job on a broken node loops: drain the node.",
            },
        },
        {
            "alert": "TrainingFailureBurst",
            "expr": f"training_queue:jobs_failed:count{{{burst}}} >= {BURST}",
            "for": duration(scale.burst_for),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "{{ $value }} jobs of queue {{ $labels.queue }} failed of"
                " {{ $labels.class }} within the hour",
                "description": "{{ $value }} jobs of queue {{ $labels.queue }} (pool"
                ' "{{ $labels.resource_pool }}", {{ $labels.provider }}) failed of class'
                f" {{{{ $labels.class }}}} in the last {duration(scale.burst_window)}: one cause"
                " behind many jobs.",
                "runbook": "Dashboard row Lifecycle, failures by class; the failed jobs' nodes"
                " (training_pod_info) and Warning events. hardware: the nodes they shared"
                " (drain, check Xid and ECC); collective: the fabric, NICs and NCCL version;"
                " oom: a new image or data; image_pull: the registry and its credentials;"
                " preempted: higher-priority work in the pool; scheduling: quota and free"
                " GPUs; unknown: the reasons the exporter logged as unmapped.",
            },
        },
    ]


def rules(scale: Timescale = PRODUCTION) -> dict[str, Any]:
    """The rule file's content."""
    recorded = [
        *_waits(scale),
        _threshold(scale),
        *_failures(scale),
        *_restarts(scale),
        *_cost(scale),
    ]
    return {
        "groups": [
            {
                "name": "training-lifecycle",
                "interval": duration(scale.interval),
                "rules": recorded + _alerts(scale),
            }
        ]
    }


HEADER = """\
# Lifecycle rules for training-job-exporter (Prometheus rule file format): queue waits,
# failures by class, GPU-hours lost to failures and restarts, and their alerts.
#
# GENERATED by deploy/generate.py from deploy/lifecycle_rules.py (which explains them): edit
# that and run `python deploy/generate.py`. The Helm chart ships these groups beside alerts.yaml.
# Unit tests: lifecycle_test.yaml beside this file (`promtool test rules lifecycle_test.yaml`).
"""


def text(scale: Timescale = PRODUCTION) -> str:
    """The rule file, YAML with block-literal expressions."""
    dumped: str = ranks.dump(rules(scale), HEADER)
    return dumped
