"""The rank and GPU-hour rules (`deploy/prometheus/ranks.yaml`), built from parameters.

`rules(PRODUCTION)` is the shipped file; tests build the same rules on a shorter timescale
(`Timescale.scaled`) so an end-to-end run fires every alert in seconds, and production and
test rules cannot drift apart.

Ranks. Per job, replica type and signal (`SIGNALS`), over the series of the job's Running
pods of that type (one per pod, or one per card where the provider reports cards): the median
and median absolute deviation (MAD), and each series' modified z-score (Iglewicz and Hoaglin):
`0.6745 * (x - median) / spread`, the spread being the MAD floored (`Signal.floor`, and
`Signal.relative_floor` of the median) so that an even job's noise does not score. Pods are
ranked like with like: a launcher or a master beside the workers does different work by
design. A replica type of one Running pod has no peers and no score. Outside `K` (3.5) is an
outlier.

GPU-hours. A series with a `gpu` label is one card; one without is a pod's average over its
cards, counted as the GPUs its job gives each pod (`training_job_gpus_per_pod`: the job's spec,
else the exporter's `gpus_per_pod` setting, which the exporter exports for every AIHC job; a
pod-level series of a job without it is not counted).
The hour's GPU-hours are the mean over the evaluations that had data, times the hour: an
evaluation is counted per provider when any exporter's series of it were there
(`training_provider:data:present`), so a Prometheus restart, a missed evaluation or an
exporter outage leaves the figure standing (the gap is assumed like the rest of the hour), and
`training_provider:gpu_hours_coverage:1h` says which share of the hour it rests on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

JOB = "provider, resource_pool, queue, job_id"
POD = f"{JOB}, pod"
CARD = f"{POD}, gpu"
# Pods are ranked against their job's pods of the same replica type (training_pod_info):
# a launcher, a parameter server or a master is not a worker's peer.
PEERS = f"{JOB}, replica_type"
RUNNING_POD = '(training_pod_phase{phase="Running"} == 1)'
# A job with a status series is ranked only while it is Running (Alaya's configured jobs
# have none: their Running pods decide).
NOT_RUNNING_JOB = '(training_job_status{status="Running"} == 0)'

# Modified z-score: 0.6745 makes the MAD of normal data estimate its standard deviation.
MAD_SCALE = 0.6745
# Outlier beyond this many (scaled) deviations: Iglewicz and Hoaglin's recommendation.
K = 3.5
# Hung: every Running pod's GPUs under 2 % and its RDMA under 1 MB/s each way.
HUNG_UTILIZATION = 0.02
HUNG_RDMA_BYTES_PER_SECOND = 1e6
# Idle, for GPU-hours and TrainingJobIdle: under 10 % busy.
IDLE_UTILIZATION = 0.10


@dataclass(frozen=True)
class Signal:
    name: str  # the `signal` label of training_pod:robust_score
    metric: str
    floor: float  # least MAD, in the metric's unit
    relative_floor: float = 0.0  # least MAD, as a share of the job's median
    pace: bool = False  # a slow rank shows in it (TrainingRankSlow)
    # The exporter's default refresh tier of the metric (AIHC's target.DEFAULT_TIERS).
    tier: str = "slow"

    @property
    def short(self) -> str:
        return self.metric.removeprefix("training_pod_")


SIGNALS = (
    Signal("gpu_utilization", "training_pod_gpu_utilization_ratio", 0.02, pace=True, tier="fast"),
    Signal("gpu_power", "training_pod_gpu_power_watts", 10.0, 0.03),
    Signal("gpu_temperature", "training_pod_gpu_temperature_celsius", 1.0),
    Signal("rdma_transmit", "training_pod_rdma_transmit_bytes_per_second", 1e6, 0.05, True),
    Signal("rdma_receive", "training_pod_rdma_receive_bytes_per_second", 1e6, 0.05, True),
    Signal("nvlink_transmit", "training_pod_nvlink_transmit_bytes_per_second", 1e6, 0.05, True),
    Signal("nvlink_receive", "training_pod_nvlink_receive_bytes_per_second", 1e6, 0.05, True),
)


@dataclass(frozen=True)
class Timescale:
    """Every duration of the rules, in seconds."""

    interval: float = 60  # both groups' evaluation interval
    slow_for: float = 600  # TrainingRankSlow, TrainingGpuThermalOutlier
    hung_for: float = 900  # TrainingJobHung
    idle_for: float = 1800  # TrainingJobIdle
    warmup: float = 1800  # a job runs this long before it can be hung or idle
    cost_window: float = 3600  # the :1h GPU-hour sums
    # A firing rank alert outlasts a dip all ranks share (a checkpoint) by this much, so it
    # does not resolve and fire again around each one.
    keep_firing: float = 300
    # The exporter's default refresh tiers (poll_interval, 5 and 15 times it): an alert waits
    # for the reading after the one that made it pending, and `margin` more for the scrape
    # and the evaluation that bring it, so its `for` covers two readings of each signal.
    fast_tier: float = 60
    medium_tier: float = 300
    slow_tier: float = 900
    margin: float = 300

    def scaled(self, factor: float) -> Timescale:
        return Timescale(*(getattr(self, f) * factor for f in self.__dataclass_fields__))

    def covering(self, wanted: float, *tiers: str) -> float:
        """`wanted`, or longer: long enough to see two readings of each of `tiers`."""
        slowest = max(getattr(self, f"{tier}_tier") for tier in tiers)
        return max(wanted, slowest + self.margin)


PRODUCTION = Timescale()


def duration(seconds: float) -> str:
    """`seconds` as a Prometheus duration: 1h, 10m, 59m30s, 1s500ms."""
    millis = round(seconds * 1000)
    parts = []
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        if millis >= size:
            parts.append(f"{millis // size}{unit}")
            millis %= size
    return "".join(parts) or "0s"


def number(value: float) -> str:
    return repr(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def _ranks(signal: Signal) -> list[dict[str, Any]]:
    s = signal.short
    ranked, median, mad, spread = (
        f"training_pod:{s}:ranked",
        f"training_job:{s}:median",
        f"training_job:{s}:mad",
        f"training_job:{s}:spread",
    )
    floor = f"clamp_min({mad}, {number(signal.floor)})"
    if signal.relative_floor:
        relative = f"{number(signal.relative_floor)} * abs({median})"
        floor = f"clamp_min(({mad} > {relative}) or {relative}, {number(signal.floor)})"
    return [
        {
            "record": ranked,
            "expr": f"{signal.metric}\n"
            f"  * on({POD}) group_left(replica_type) training_pod:ranked:info",
        },
        {"record": median, "expr": f"quantile by ({PEERS}) (0.5, {ranked})"},
        {
            "record": mad,
            "expr": f"quantile by ({PEERS}) (\n"
            f"  0.5, abs({ranked} - on({PEERS}) group_left {median})\n)",
        },
        {"record": spread, "expr": floor},
        {
            "record": "training_pod:robust_score",
            "expr": f"{number(MAD_SCALE)} * ({ranked} - on({PEERS}) group_left {median})\n"
            f"  / on({PEERS}) group_left {spread}",
            "labels": {"signal": signal.name},
        },
    ]


def _activity() -> list[dict[str, Any]]:
    # Per pod first (cards fold into their pod), then the join with the pods' phases: the
    # join sees one series a pod, not one a card.
    running = f"and on({POD}) {RUNNING_POD}"
    return [
        {
            "record": "training_job:gpu_utilization_ratio:max",
            "expr": f"max by ({JOB}) (\n"
            f"  max by ({POD}) (training_pod_gpu_utilization_ratio) {running}\n)",
        },
        {
            "record": "training_job:rdma_bytes_per_second:max",
            "expr": f"max by ({JOB}) (\n"
            f"  max by ({POD}) (\n"
            "    training_pod_rdma_transmit_bytes_per_second\n"
            f"      or training_pod_rdma_receive_bytes_per_second\n  ) {running}\n)",
        },
        {
            # How long the job has run: the provider's own figure where it reports one,
            # else since its first Running. Never since its creation: a job that queued for
            # 40 minutes is not 40 minutes into loading its model. A job with neither is
            # never called hung or idle.
            "record": "training_job:running_seconds:estimate",
            "expr": f"max by ({JOB}) (training_job_running_seconds)\n"
            f"  or on({JOB})\n"
            f"max by ({JOB}) (time() - training_job_started_timestamp_seconds)",
        },
    ]


def _running_job_past_warmup(scale: Timescale) -> str:
    return (
        f"  unless on({JOB}) {NOT_RUNNING_JOB}\n"
        f"  and on({JOB}) (training_job:running_seconds:estimate > {number(scale.warmup)})"
    )


# What the pace signals of each tier measure, in the alert's words.
PACE_WORDS = {"fast": "GPU utilisation", "slow": "RDMA or NVLink throughput"}
RANK_RUNBOOK = (
    "Dashboard row Ranks, this job: which signal is off and whether the pod is lower (slow:"
    " throttled or failing GPU, NIC at a lower rate, bad host) or higher (its peers wait on"
    " another rank). Check the node's GPU clocks, XID errors and NIC link rate; cordon the node"
    " and restart the job from its checkpoint. Pipeline stages that differ by design: silence"
    " the job."
)
WHERE = "{{ $labels.job_id }} ({{ $labels.provider }})"
POD_NAME = "{{ $labels.pod }}{{ with $labels.gpu }} card {{ . }}{{ end }}"


# The slow-rank alert of each tier's pace signals: one alert a tier, so each waits for two
# readings of its own signals (10 minutes of GPU utilisation, 20 of RDMA and NVLink), not of
# the slowest.
RANK_SLOW = {"fast": "TrainingRankSlow", "slow": "TrainingRankLinkSlow"}


def _rank_slow(scale: Timescale, tier: str) -> dict[str, Any]:
    """The slow-rank alert on the pace signals of one refresh tier (`RANK_SLOW`)."""
    pace = "|".join(s.name for s in SIGNALS if s.pace and s.tier == tier)
    wait = duration(scale.covering(scale.slow_for, tier))
    readings = "" if tier == "fast" else f", two readings of the {tier} refresh tier"
    k = number(K)
    return {
        "alert": RANK_SLOW[tier],
        # Outliers first, then one alert per pod (card): the aggregation sees a few series,
        # not every score.
        "expr": f'max by ({CARD}) (\n  abs(training_pod:robust_score{{signal=~"{pace}"}}) > {k}\n)',
        "for": wait,
        "keep_firing_for": duration(scale.keep_firing),
        "labels": {"severity": "warning"},
        "annotations": {
            "summary": f"Pod {POD_NAME} of job {{{{ $labels.job_id }}}} is out of step with its"
            " peers",
            "description": f"Pod {POD_NAME} of job {WHERE} has been more than {k} robust "
            f"deviations from its job's median {PACE_WORDS[tier]} for {wait}{readings} (score "
            "{{ $value | humanize }}). A synchronous job runs at its slowest rank's pace.",
            "runbook": RANK_RUNBOOK,
        },
    }


def _alerts(scale: Timescale) -> list[dict[str, Any]]:
    k = number(K)
    flat = (
        f"training_job:gpu_utilization_ratio:max < {number(HUNG_UTILIZATION)}\n"
        f"  unless on({JOB}) (training_job:rdma_bytes_per_second:max"
        f" >= {number(HUNG_RDMA_BYTES_PER_SECOND)})\n"
    )
    where, pod = WHERE, POD_NAME
    # Temperature and power are slow-tier, GPU utilisation fast; hung and idle read RDMA.
    thermal_for = duration(scale.covering(scale.slow_for, "slow", "fast"))
    hung_for = duration(scale.covering(scale.hung_for, "fast", "slow"))
    idle_for = duration(scale.covering(scale.idle_for, "fast", "slow"))
    return [
        _rank_slow(scale, "fast"),
        _rank_slow(scale, "slow"),
        {
            "alert": "TrainingGpuThermalOutlier",
            "expr": f"max by ({CARD}) (\n"
            f'    (training_pod:robust_score{{signal="gpu_temperature"}} > {k})\n'
            "  or\n"
            f'    ((- training_pod:robust_score{{signal="gpu_power"}}) > {k})\n'
            ")\n"
            f"and on({CARD})\n"
            f'  (abs(training_pod:robust_score{{signal="gpu_utilization"}}) <= {k})',
            "for": thermal_for,
            "keep_firing_for": duration(scale.keep_firing),
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "GPUs of pod {{ $labels.pod }} (job {{ $labels.job_id }}) run hot or"
                " draw little power for their load",
                "description": f"Pod {pod} of job {where}"
                f" has been hotter, or drawing less power, than its job's band ({k} robust "
                f"deviations) for {thermal_for} while its GPU utilisation is in "
                "the band (score {{ $value | humanize }}).",
                "runbook": "A card throttling (thermal or power cap) before it slows the job:"
                " check the node's cooling, fan and power-cap settings and the GPU's clock"
                " throttle reasons (nvidia-smi -q -d PERFORMANCE); drain the node at the next"
                " checkpoint.",
            },
        },
        {
            "alert": "TrainingJobHung",
            "expr": flat + _running_job_past_warmup(scale),
            "for": hung_for,
            "labels": {"severity": "critical"},
            "annotations": {
                "summary": "Training job {{ $labels.job_id }} looks hung",
                "description": f"Job {where} is Running, but every pod's GPU utilisation has "
                f"stayed under {HUNG_UTILIZATION:.0%} and its RDMA traffic under 1 MB/s for "
                f"{hung_for} (busiest GPU {{{{ $value | humanizePercentage }}}}).",
                "runbook": "A deadlocked collective or a rank that died without failing the"
                " job: read the pods' last log lines (NCCL watchdog, timeouts), the job's"
                " Warning events and RDMA health; restart from the last checkpoint.",
            },
        },
        {
            "alert": "TrainingJobIdle",
            "expr": f"training_job:gpu_utilization_ratio:max < {number(IDLE_UTILIZATION)}\n"
            f"  unless on({JOB}) (\n  " + flat.replace("\n", "\n  ").rstrip() + "\n  )\n"
            f"{_running_job_past_warmup(scale)}",
            "for": idle_for,
            "labels": {"severity": "warning"},
            "annotations": {
                "summary": "Training job {{ $labels.job_id }} holds idle GPUs",
                "description": f"Job {where} is Running and moving data, but none of its GPUs "
                f"has been over {IDLE_UTILIZATION:.0%} busy for {idle_for} "
                "(busiest {{ $value | humanizePercentage }}): its GPU-hours are paid for and "
                "unused.",
                "runbook": "An input-bound job (data loader, storage), an interactive or"
                " debugging session, or an evaluation loop on training GPUs: ask the owner;"
                " the dashboard's Idle GPU-hours row ranks the jobs by cost.",
            },
        },
    ]


def _gpu_hours(scale: Timescale) -> list[dict[str, Any]]:
    util = "training_pod_gpu_utilization_ratio"
    running = f"and on({POD}) {RUNNING_POD}"

    # Cards counted per pod first, then joined with the pods' phases (one series a pod); a
    # pod-level series times its job's GPUs per pod. Each selector is a pass over every
    # utilisation series: each appears once an expression, and idle reuses allocated.
    allocated = (
        f'count by ({POD}) ({util}{{gpu!=""}}) {running}\n'
        f'  or (count by ({POD}) ({util}{{gpu=""}}) {running})\n'
        f"    * on({JOB}) group_left max by ({JOB}) (training_job_gpus_per_pod)"
    )
    # Idle: the cards under the threshold; a pod-level pod's every GPU when its average is.
    idle = (
        f'count by ({POD}) ({util}{{gpu!=""}} < {number(IDLE_UTILIZATION)})\n'
        f"    and on({POD}) training_pod:gpus_allocated:count\n"
        f"  or training_pod:gpus_allocated:count\n"
        f'    and on({POD}) (max by ({POD}) ({util}{{gpu=""}}) < {number(IDLE_UTILIZATION)})\n'
        "  or 0 * training_pod:gpus_allocated:count"
    )

    # Half an interval short of the window: exactly window / interval evaluations in it,
    # whether the range includes its start (Prometheus 2) or not (3).
    window = duration(scale.cost_window - scale.interval / 2)
    evaluations = number(scale.cost_window / scale.interval)
    hours = number(scale.cost_window / 3600)
    present = "training_provider:data:present"
    rules: list[dict[str, Any]] = [
        {
            "record": present,
            "expr": "clamp_max(count by (provider) (training_exporter_series), 1)",
        },
        {
            "record": "training_provider:gpu_hours_coverage:1h",
            "expr": f"count_over_time({present}[{window}]) / {evaluations}",
        },
        {"record": "training_pod:gpus_allocated:count", "expr": allocated},
        {"record": "training_pod:gpus_idle:count", "expr": idle},
    ]
    for level, by in (
        ("job", JOB),
        ("queue", "provider, resource_pool, queue"),
        ("resource_pool", "provider, resource_pool"),
    ):
        for what in ("allocated", "idle"):
            rules.append(
                {
                    "record": f"training_{level}:gpus_{what}:count",
                    "expr": f"sum by ({by}) (training_pod:gpus_{what}:count)",
                }
            )
            rules.append(
                {
                    "record": f"training_{level}:gpu_hours_{what}:1h",
                    "expr": f"sum_over_time(training_{level}:gpus_{what}:count[{window}])\n"
                    f"  / on(provider) group_left count_over_time({present}[{window}])"
                    f" * {hours}",
                }
            )
    return rules


def rules(scale: Timescale = PRODUCTION) -> dict[str, Any]:
    """The rule file's content."""
    ranks: list[dict[str, Any]] = [
        {
            "record": "training_job:pods_running:count",
            "expr": f"count by ({JOB}) {RUNNING_POD}",
        },
        {
            # Running pods, one series each, with their replica type where the pod's info
            # gives one (the one info series of each pod, should it change type).
            "record": "training_pod:running:info",
            "expr": f"max by ({POD}, replica_type) (\n"
            f"  {RUNNING_POD}\n"
            f"    * on({POD}) group_left(replica_type)\n"
            f"  topk by ({POD}) (1, max by ({POD}, replica_type) (training_pod_info))\n"
            ")\n"
            f"or max by ({POD}) ({RUNNING_POD} unless on({POD}) training_pod_info)",
        },
        {
            # The pods every signal ranks: Running, of a replica type with two or more
            # Running pods in a Running job. Worked out once here, not once per signal.
            "record": "training_pod:ranked:info",
            "expr": "training_pod:running:info\n"
            f"  and on({PEERS}) (count by ({PEERS}) (training_pod:running:info) >= 2)\n"
            f"  unless on({JOB}) {NOT_RUNNING_JOB}",
        },
    ]
    for signal in SIGNALS:
        ranks += _ranks(signal)
    interval = duration(scale.interval)
    return {
        "groups": [
            {
                "name": "training-ranks",
                "interval": interval,
                "rules": ranks + _activity() + _alerts(scale),
            },
            {"name": "training-gpu-hours", "interval": interval, "rules": _gpu_hours(scale)},
        ]
    }


HEADER = """\
# Rank and GPU-hour rules for training-job-exporter (Prometheus rule file format).
#
# GENERATED by deploy/generate.py from deploy/rank_rules.py (which explains them): edit that
# and run `python deploy/generate.py`. The Helm chart ships these groups beside alerts.yaml.
# Unit tests: ranks_test.yaml beside this file (`promtool test rules ranks_test.yaml`).
"""


def text(scale: Timescale = PRODUCTION) -> str:
    """The rule file, YAML with block-literal expressions."""
    return dump(rules(scale), HEADER)


def dump(document: dict[str, Any], header: str) -> str:
    """A rule file's text: `header`, then `document` with block-literal expressions."""

    class Dumper(yaml.SafeDumper):
        def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
            super().increase_indent(flow, False)  # lists indented under their key

    def string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = "|" if "\n" in value or len(value) > 80 else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, string)
    body = yaml.dump(document, Dumper=Dumper, sort_keys=False, width=1000, allow_unicode=True)
    return header + "---\n" + body
