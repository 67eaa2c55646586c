"""The panels over the series the exporter serves, as Prometheus scrapes them: each job's
status and pods, their GPUs, interconnect, CPU, memory and disk, the jobs' warning events, and
the exporter's own health (targets up, data age, request budget, tiers, API requests).
"""

from __future__ import annotations

from .blocks import (
    EXPORTER,
    JOB,
    POD_KEY,
    POD_LEGEND,
    Json,
    or_zero,
    panel,
    query,
    ratio_timeseries,
    row,
    selected,
    send_receive,
    state_mapping,
    table,
    timeseries,
)


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
