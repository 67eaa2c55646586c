"""An AIHC target's configuration (`aihc:` in the file), its items and their default tiers.

Default tiers (why): most alerts and dashboards look at GPU utilisation and GPU memory, so those
are fast. RDMA errors, CPU and memory, the tensor pipe and the pods (phases, restarts) and events
are medium: they drive alerts with `for: 10m` or slower. Temperature, power, RDMA health,
throughput rates, disk and packet rates change slowly or are read on dashboards only: slow. At
the default 10 requests/s a 60 s fast tier of two calls per job fits 250 jobs (500 calls a
minute of 600); reading all 24 calls every minute would fit 25.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Final, Literal

from pydantic import Field, SecretStr

from exporter.configkit import (
    MAX_QUEUES,
    MAX_STATUSES,
    PositiveDuration,
    TargetBase,
    TierName,
)

# The provider's name: its key in the configuration file and its `provider` label.
NAME: Final = "aihc"

AIHC_METRIC_TYPES: tuple[str, ...] = (
    "GpuUsage",
    "GpuMemoryUsage",
    "CpuUsage",
    "MemoryUsage",
    "CpuTime",
    "MemoryAllocation",
    "DiskReadRate",
    "DiskWriteRate",
    "RDMASendDataRate",
    "RDMARecvDataRate",
    "PCIESendDataRate",
    "PCIERecvDataRate",
    "NVLinkSendDataRate",
    "NVLinkRecvDataRate",
    "GpuTemperature",
    "GpuPowerUsage",
    "GpuPipeTensorUsage",
    "RDMAHealth",
    "RDMASendErrorRate",
    "RDMARecvErrorRate",
    "RDMASendPacketsRate",
    "RDMARecvPacketsRate",
)
# The contract family (`exporter.metrics.RESOURCE_METRICS`) each metric type fills.
METRIC_BY_TYPE: Final[dict[str, str]] = {
    "GpuUsage": "training_pod_gpu_utilization_ratio",
    "GpuMemoryUsage": "training_pod_gpu_memory_utilization_ratio",
    "CpuUsage": "training_pod_cpu_utilization_ratio",
    "MemoryUsage": "training_pod_memory_utilization_ratio",
    "CpuTime": "training_pod_cpu_used_cores",
    "MemoryAllocation": "training_pod_memory_used_bytes",
    "DiskReadRate": "training_pod_disk_read_bytes_per_second",
    "DiskWriteRate": "training_pod_disk_write_bytes_per_second",
    "RDMASendDataRate": "training_pod_rdma_transmit_bytes_per_second",
    "RDMARecvDataRate": "training_pod_rdma_receive_bytes_per_second",
    "PCIESendDataRate": "training_pod_pcie_transmit_bytes_per_second",
    "PCIERecvDataRate": "training_pod_pcie_receive_bytes_per_second",
    "NVLinkSendDataRate": "training_pod_nvlink_transmit_bytes_per_second",
    "NVLinkRecvDataRate": "training_pod_nvlink_receive_bytes_per_second",
    "GpuTemperature": "training_pod_gpu_temperature_celsius",
    "GpuPowerUsage": "training_pod_gpu_power_watts",
    "GpuPipeTensorUsage": "training_pod_gpu_tensor_pipe_active_ratio",
    "RDMAHealth": "training_pod_rdma_healthy",
    "RDMASendErrorRate": "training_pod_rdma_transmit_errors_per_second",
    "RDMARecvErrorRate": "training_pod_rdma_receive_errors_per_second",
    "RDMASendPacketsRate": "training_pod_rdma_transmit_packets_per_second",
    "RDMARecvPacketsRate": "training_pod_rdma_receive_packets_per_second",
}
# Upstream reports these as percentages unless `usage_unit: ratio`.
USAGE_TYPES: Final = frozenset(
    {"GpuUsage", "GpuMemoryUsage", "CpuUsage", "MemoryUsage", "GpuPipeTensorUsage"}
)
# What a target reads per job, one call each: the items refresh tiers are made of.
PODS: Final = "pods"
EVENTS: Final = "events"
ITEMS: tuple[str, ...] = (*AIHC_METRIC_TYPES, PODS, EVENTS)

_FAST = ("GpuUsage", "GpuMemoryUsage")
_MEDIUM = (
    "RDMASendErrorRate",
    "RDMARecvErrorRate",
    "CpuUsage",
    "MemoryUsage",
    "GpuPipeTensorUsage",
    PODS,
    EVENTS,
)
DEFAULT_TIERS: Final[dict[str, TierName]] = {
    item: "fast" if item in _FAST else "medium" if item in _MEDIUM else "slow" for item in ITEMS
}


class AihcTarget(TargetBase):
    provider: ClassVar[str] = NAME
    items: ClassVar[tuple[str, ...]] = ITEMS
    default_tiers: ClassVar[Mapping[str, TierName]] = DEFAULT_TIERS
    state_items: ClassVar[frozenset[str]] = frozenset({PODS})
    endpoint: str = "https://aihc.bj.baidubce.com"
    access_key_id: SecretStr | None = None
    access_key_id_file: Path | None = None
    secret_access_key: SecretStr | None = None
    secret_access_key_file: Path | None = None
    resource_pool_id: str = Field(min_length=1)
    queues: list[str] = Field(default=[], max_length=MAX_QUEUES)
    metric_types: list[Literal[AIHC_METRIC_TYPES]] = Field(  # type: ignore[valid-type]
        default=[], max_length=len(AIHC_METRIC_TYPES)
    )
    metric_statuses: list[str] = Field(default=["Running"], max_length=MAX_STATUSES)
    usage_unit: Literal["percent", "ratio"] = "percent"
    events: bool = True
    page_size: int = Field(default=100, ge=1, le=1000)
    # The first DescribeJobMetrics of a pod asks this many timeSteps back.
    time_step: PositiveDuration = 60.0
    first_window_steps: int = Field(default=5, ge=1, le=1000)
    # GPUs a pod holds where the job's spec names no GPU resource (training_job_gpus_per_pod).
    gpus_per_pod: int = Field(default=8, ge=0, le=1024)

    @property
    def effective_metric_types(self) -> tuple[str, ...]:
        return tuple(self.metric_types) or AIHC_METRIC_TYPES

    def read_items(self) -> tuple[str, ...]:
        return (*self.effective_metric_types, PODS, *((EVENTS,) if self.events else ()))
