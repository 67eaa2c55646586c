"""The metric contract as code: every family the exporter can publish.

`docs/metrics.md` is the human contract; this module is its machine form. The README's
metric reference is generated from `SPECS` (`python -m exporter.docs`), and a test fails when
README, this module and docs/metrics.md disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from exporter.model import JOB_LABELS, POD_LABELS, TARGET_LABELS

Kind = Literal["gauge", "counter", "histogram"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    kind: Kind
    help: str
    labels: tuple[str, ...]
    # Where the value comes from, for the reference table.
    source: str = ""
    # Families with per-card series carry `gpu` on those only.
    per_card: bool = False

    @property
    def family(self) -> str:
        """The family name prometheus-client wants: counters without `_total`."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name


def _job(name: str, help_: str, source: str, *extra: str) -> MetricSpec:
    return MetricSpec(name, "gauge", help_, (*JOB_LABELS, *extra), source)


def _pod(name: str, help_: str, source: str, *extra: str) -> MetricSpec:
    return MetricSpec(name, "gauge", help_, (*POD_LABELS, *extra), source)


JOB_SPECS: Final = (
    _job(
        "training_job_info",
        "Descriptive labels of a training job; always 1.",
        "AIHC DescribeJobs",
        "job_name",
        "job_type",
        "priority",
        "user_id",
        "image",
    ),
    _job(
        "training_job_status",
        "Job status as a state set: 1 for the current status.",
        "AIHC `status`",
        "status",
    ),
    _job(
        "training_job_created_timestamp_seconds",
        "When the job was created, unix seconds.",
        "`createdAt`",
    ),
    _job(
        "training_job_finished_timestamp_seconds",
        "When the job finished, unix seconds; absent while it runs.",
        "`finishedAt`",
    ),
    _job("training_job_replicas", "Replicas the job asked for.", "`jobSpec.replicas`"),
    _pod(
        "training_pod_info",
        "Descriptive labels of a pod; always 1.",
        "AIHC DescribeJob needDetail; Alaya pod basic",
        "replica_type",
        "node",
        "pod_ip",
    ),
    _pod(
        "training_pod_phase",
        "Pod phase as a state set: 1 for the current phase.",
        "`podPhase`",
        "phase",
    ),
    _pod("training_pod_restarts", "Container restarts of the pod.", "`restartCount`"),
    MetricSpec(
        "training_job_events_total",
        "counter",
        "Job events, upstream `count` summed per type and reason.",
        (*JOB_LABELS, "event_type", "reason"),
        "AIHC job events",
    ),
    _job(
        "training_job_last_event_timestamp_seconds",
        "Newest `lastTimestamp` of the job's events per type and reason, unix seconds.",
        "AIHC job events",
        "event_type",
        "reason",
    ),
    # Free with the job list: live replies carry them, the documented tables do not.
    _job(
        "training_job_gpu_utilization_ratio",
        "Job-wide GPU utilisation, 0-1; only where the job list carries it.",
        "AIHC DescribeJobs `gpuUtilizationPercent` (observed in live replies, not documented)",
    ),
    _job(
        "training_job_gpu_memory_utilization_ratio",
        "Job-wide GPU memory utilisation, 0-1; only where the job list carries it.",
        "AIHC DescribeJobs `gpuMemoryUtilizationPercent` (observed in live replies, "
        "not documented)",
    ),
    _job(
        "training_job_running_seconds",
        "How long the job has run, seconds; only where the job list carries it.",
        "AIHC DescribeJobs `runTimeNanoseconds` (observed in live replies, not documented)",
    ),
    # A job's life (exporter.providers.kit.lifecycle): AIHC.
    _job(
        "training_job_started_timestamp_seconds",
        "When the job first ran (its first Running), unix seconds; absent until known.",
        "AIHC DescribeJob `jobTimeLine`, else `runTimeNanoseconds`, else the list",
    ),
    _job(
        "training_job_queue_wait_seconds",
        "Seconds from the job's creation to its first Running; while it waits, to now.",
        "AIHC `createdAt` and the first Running",
    ),
    _job(
        "training_job_restarting_seconds",
        "Seconds the job spent restarting or queued again after its first Running.",
        "AIHC DescribeJob `jobTimeLine`",
    ),
    _job(
        "training_job_gpus_per_pod",
        "GPUs each pod of the job holds: from its spec, or the target's gpus_per_pod setting.",
        "AIHC `jobSpec.resources`, else `gpus_per_pod`",
        "source",
    ),
    _job(
        "training_job_failure_class",
        "Why a failed job failed: 1 for its class, one of a closed set.",
        "AIHC job events, pods' reasons and status",
        "class",
    ),
)

# (name, help) of the resource families; which upstream metric type fills each is the
# provider's (`ProviderSpec.metric_types`), and so is the reference's `source` column.
RESOURCE_METRICS: Final[tuple[tuple[str, str], ...]] = (
    ("training_pod_gpu_utilization_ratio", "GPU utilisation, 0-1."),
    ("training_pod_gpu_memory_utilization_ratio", "GPU memory utilisation, 0-1."),
    ("training_pod_cpu_utilization_ratio", "CPU utilisation, 0-1."),
    ("training_pod_memory_utilization_ratio", "Memory utilisation, 0-1."),
    ("training_pod_cpu_used_cores", "CPU used, in cores."),
    ("training_pod_memory_used_bytes", "Memory used, bytes."),
    ("training_pod_disk_read_bytes_per_second", "Disk read rate, bytes/s."),
    ("training_pod_disk_write_bytes_per_second", "Disk write rate, bytes/s."),
    ("training_pod_rdma_transmit_bytes_per_second", "RDMA send rate, bytes/s."),
    ("training_pod_rdma_receive_bytes_per_second", "RDMA receive rate, bytes/s."),
    ("training_pod_pcie_transmit_bytes_per_second", "PCIe send rate, bytes/s."),
    ("training_pod_pcie_receive_bytes_per_second", "PCIe receive rate, bytes/s."),
    ("training_pod_nvlink_transmit_bytes_per_second", "NVLink send rate, bytes/s."),
    ("training_pod_nvlink_receive_bytes_per_second", "NVLink receive rate, bytes/s."),
    ("training_pod_gpu_temperature_celsius", "GPU temperature, degrees Celsius."),
    ("training_pod_gpu_power_watts", "GPU power draw, watts."),
    ("training_pod_gpu_tensor_pipe_active_ratio", "GPU tensor pipe activity, 0-1."),
    ("training_pod_rdma_healthy", "RDMA health: 1 healthy, 0 not."),
    ("training_pod_rdma_transmit_errors_per_second", "RDMA send errors per second."),
    ("training_pod_rdma_receive_errors_per_second", "RDMA receive errors per second."),
    ("training_pod_rdma_transmit_packets_per_second", "RDMA packets sent per second."),
    ("training_pod_rdma_receive_packets_per_second", "RDMA packets received per second."),
)
# Families whose series may be per card (`gpu` label) where the provider reads cards.
PER_CARD: Final = frozenset(
    {"training_pod_gpu_utilization_ratio", "training_pod_gpu_memory_utilization_ratio"}
)
# Utilisation families that also come as a query window's max and average.
WINDOWED: Final = (
    "training_pod_gpu_utilization_ratio",
    "training_pod_gpu_memory_utilization_ratio",
    "training_pod_cpu_utilization_ratio",
    "training_pod_memory_utilization_ratio",
)


def _resource_spec(name: str, help_: str) -> MetricSpec:
    return MetricSpec(
        name, "gauge", f"Latest sample of the pod's {help_}", POD_LABELS, per_card=name in PER_CARD
    )


def _window_specs() -> tuple[MetricSpec, ...]:
    specs = []
    for name in WINDOWED:
        base = name.removesuffix("_ratio")
        for stat in ("max", "avg"):
            specs.append(
                MetricSpec(
                    f"{base}_window_{stat}_ratio",
                    "gauge",
                    f"{stat.capitalize()} of {name} over the Alaya query window, 0-1.",
                    POD_LABELS,
                    f"Alaya `{stat}Rate`",
                    per_card=name in PER_CARD,
                )
            )
    return tuple(specs)


RESOURCE_SPECS: Final = (
    *(_resource_spec(*row) for row in RESOURCE_METRICS),
    _pod(
        "training_pod_last_sample_timestamp_seconds",
        "Time of the newest upstream sample seen for the pod, any metric, unix seconds.",
        "both",
    ),
    *_window_specs(),
    MetricSpec(
        "training_alaya_query_window_seconds",
        "gauge",
        "Length of the window Alaya's maxRate/avgRate cover, seconds.",
        ("provider", "target"),
        "Alaya `period` or startTime/endTime",
    ),
)

SELF_SPECS: Final = (
    MetricSpec(
        "training_exporter_build_info",
        "gauge",
        "Version of the exporter; always 1.",
        ("version", "python_version"),
    ),
    MetricSpec(
        "training_exporter_up",
        "gauge",
        "1 when the target's last round (its job list and every call since the round before) "
        "had no failed request and no pause; 0 from the first failure.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_last_success_timestamp_seconds",
        "gauge",
        "When a round of the target last ended with up 1.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_poll_duration_seconds",
        "histogram",
        "Duration of a round's job list read.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_poll_overruns_total",
        "counter",
        "Rounds in which a due call waited longer than a round: the queue is behind.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_api_requests_total",
        "counter",
        "Provider API requests by target, endpoint and code: the HTTP status (Alaya: the "
        "body's status) among 200, 401, 403, 404, 429, 500, 502, 503, 504 and Alaya's "
        "documented gateway codes, else other; or "
        "timeout / error / too_large (a reply over max_reply_bytes). Read this to estimate "
        "API cost.",
        ("provider", "target", "endpoint", "code"),
    ),
    MetricSpec(
        "training_exporter_api_calls_dropped_total",
        "counter",
        "Provider API calls dropped unsent because their turn in the request budget (or the "
        "end of a Retry-After pause) would have come after their deadline: their item was due "
        "again, or their round over. Not a failure, and not a request.",
        ("provider", "target", "endpoint"),
    ),
    MetricSpec(
        "training_exporter_api_request_duration_seconds",
        "histogram",
        "Duration of provider API requests, from the request's write to the end of its reply "
        "(the wait for the budget not included).",
        ("provider", "endpoint"),
    ),
    MetricSpec(
        "training_exporter_api_retries_total",
        "counter",
        "Provider API requests retried.",
        ("provider", "endpoint"),
    ),
    MetricSpec(
        "training_exporter_dropped_values_total",
        "counter",
        "Upstream values dropped because they were not usable numbers, by reason: unparsable, "
        "not_finite, out_of_range (a 0-1 metric outside it, a negative count), bad_timestamp, "
        "invalid_sample, invalid_series, invalid_item (a job, pod or event), duplicate_series.",
        ("provider", "reason"),
    ),
    MetricSpec(
        "training_exporter_series",
        "gauge",
        "Series currently exported, per provider.",
        ("provider",),
    ),
    MetricSpec(
        "training_exporter_jobs_left_out_total",
        "counter",
        "Jobs left out of a round because the target reached max_jobs or max_series.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_config_last_reload_successful",
        "gauge",
        "1 when the last configuration reload (SIGHUP, POST /-/reload) succeeded, 0 when it "
        "was refused and the running configuration stayed.",
        (),
    ),
    MetricSpec(
        "training_exporter_config_last_reload_success_timestamp_seconds",
        "gauge",
        "When the configuration was last loaded successfully (at start, or by a reload).",
        (),
    ),
    MetricSpec(
        "training_exporter_budget_required_requests_per_second",
        "gauge",
        "Requests per second the target's refresh tiers need at their configured intervals, "
        "for the current job and pod counts.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_budget_requests_per_second",
        "gauge",
        "The request budget this replica spends (limits.requests_per_second / --shard.count); "
        "absent when unlimited.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_tier_interval_seconds",
        "gauge",
        "Effective interval of a refresh tier: its configured one, stretched when the plan "
        "needs more than the budget.",
        (*TARGET_LABELS, "tier"),
    ),
    MetricSpec(
        "training_exporter_duplicate_series",
        "gauge",
        "Samples left out of the current exposition because an earlier sample of the same "
        "family had the same labels (two targets on one pool, say), per provider.",
        ("provider",),
    ),
    MetricSpec(
        "training_exporter_stale_parts",
        "gauge",
        "Parts of jobs (list entry, detail, metric type, events) served from an earlier "
        "read because their last read failed.",
        TARGET_LABELS,
    ),
    MetricSpec(
        "training_exporter_discovery_errors_total",
        "counter",
        "Polls whose job list could not be read or trusted (jobs file missing or invalid, "
        "list discovery failed, pages that made no progress); the last good list was used "
        "instead.",
        TARGET_LABELS,
    ),
)

DATA_SPECS: Final = (*JOB_SPECS, *RESOURCE_SPECS)
SPECS: Final = (*DATA_SPECS, *SELF_SPECS)
SPEC_BY_NAME: Final = {s.name: s for s in SPECS}

KNOWN_JOB_STATUSES: Final = (
    "Created",
    "Pending",
    "Scheduled",
    "Starting",
    "Running",
    "Restarting",
    "Stopping",
    "Stopped",
    "Succeeded",
    "Failed",
    "Abnormal",
)
KNOWN_POD_PHASES: Final = (
    "Pending",
    "Starting",
    "Running",
    "Failed",
    "Succeed",
    "Succeeded",
    "Unknown",
)
