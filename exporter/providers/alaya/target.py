"""An Alaya target's configuration (`alaya:` in the file), its items and their default tiers.

Default tiers (why): Alaya costs a call per pod and type, not per job: 500 pods with GPU
utilisation and memory both fast need 1,000 calls a minute, more than 10 requests/s give. So
only `gpu` (per-card utilisation) is fast, and `vram`, `cpu`, `memory` and the pod's `basic`
are medium; each read also brings the window's max and average, so a 5-minute read loses no
peak.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, ClassVar, Final, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator

from exporter.configkit import (
    MAX_STATUSES,
    PositiveDuration,
    StrictModel,
    TargetBase,
    TierName,
)

# The provider's name: its key in the configuration file and its `provider` label.
NAME: Final = "alaya"

TYPES: tuple[str, ...] = ("gpu", "vram", "cpu", "memory")
BASIC: Final = "basic"
# The contract family (`exporter.metrics.RESOURCE_METRICS`) each type fills.
METRIC_BY_TYPE: Final[dict[str, str]] = {
    "gpu": "training_pod_gpu_utilization_ratio",
    "vram": "training_pod_gpu_memory_utilization_ratio",
    "cpu": "training_pod_cpu_utilization_ratio",
    "memory": "training_pod_memory_utilization_ratio",
}
# What a target reads per pod, one call each: the items refresh tiers are made of.
ITEMS: tuple[str, ...] = (*TYPES, BASIC)
PERIODS: tuple[str, ...] = ("15m", "1h", "6h", "24h", "3d", "7d", "30d")
DEFAULT_TIERS: Final[dict[str, TierName]] = {
    item: "fast" if item == "gpu" else "medium" for item in ITEMS
}
# List bounds: each job and pod costs calls every poll, and a 1 MiB file could list ~100,000.
MAX_JOBS = 10_000
MAX_PODS_PER_JOB = 1_024


def _int_as_text(value: object) -> object:
    # Alaya's aidcId is a number in the list's records; YAML users write either.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


POD_PATTERN_FIELDS = frozenset({"name", "id", "index"})


def _check_pod_pattern(value: str) -> str:
    try:
        parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(value)]
    except ValueError:
        raise ValueError("unbalanced { or }: write {{ and }} for literal braces") from None
    fields = [f for f, spec, conv in parsed if f is not None]
    if any(f not in POD_PATTERN_FIELDS for f in fields) or any(s or c for _, s, c in parsed):
        raise ValueError("placeholders are {name}, {id} and {index}, as in {name}-worker-{index}")
    if value and "index" not in fields:
        raise ValueError("needs {index}, or every worker of a job gets the same pod name")
    return value


class AlayaJob(StrictModel):
    id: str = Field(min_length=1)
    pods: list[str] = Field(min_length=1, max_length=MAX_PODS_PER_JOB)


class AlayaTarget(TargetBase):
    provider: ClassVar[str] = NAME
    items: ClassVar[tuple[str, ...]] = ITEMS
    default_tiers: ClassVar[Mapping[str, TierName]] = DEFAULT_TIERS
    state_items: ClassVar[frozenset[str]] = frozenset({BASIC})
    endpoint: str = "https://api.alayanew.com"
    api_key: SecretStr | None = None
    api_key_file: Path | None = None
    types: list[Literal[TYPES]] = Field(  # type: ignore[valid-type]
        default=list(TYPES), max_length=len(TYPES)
    )
    # Either a preset `period`, or a `lookback` sent as startTime/endTime.
    period: Literal[PERIODS] | None = "15m"  # type: ignore[valid-type]
    lookback: PositiveDuration | None = None
    time_zone: str = "Asia/Shanghai"
    pod_details: bool = True
    jobs: list[AlayaJob] = Field(default=[], max_length=MAX_JOBS)
    # A YAML or JSON file `{jobs: [...]}`, re-read when it changes; its jobs join `jobs`.
    jobs_file: Path | None = None
    # `list`: the jobs come from Alaya's (undocumented) job list; `jobs` / `jobs_file` then
    # only name the pods of the jobs they list.
    discovery: Literal["configured", "list"] = "configured"
    # The job list's access key pair (not the API key): required only with `discovery: list`.
    access_key_id: SecretStr | None = None
    access_key_id_file: Path | None = None
    secret_access_key: SecretStr | None = None
    secret_access_key_file: Path | None = None
    # Listed jobs exported, and those whose pods are polled; matched without case. []: all.
    list_statuses: list[str] = Field(default=["Running"], max_length=MAX_STATUSES)
    metric_statuses: list[str] = Field(default=["Running"], max_length=MAX_STATUSES)
    aidc_id: Annotated[str, BeforeValidator(_int_as_text)] | None = None
    # Pods of a listed job no jobs entry names: `{name}`, `{id}`, `{index}` (0..workerCount-1).
    pod_pattern: str = Field(default="", max_length=253)
    list_page_size: int = Field(default=100, ge=1, le=1000)
    list_max_pages: int = Field(default=50, ge=1, le=1000)

    @field_validator("types")
    @classmethod
    def _unique_types(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("unknown time zone: use an IANA name like Asia/Shanghai") from None
        return value

    @model_validator(mode="after")
    def _has_window(self) -> AlayaTarget:
        if self.period is None and self.lookback is None:
            raise ValueError("set period (15m, 1h, 6h, 24h, 3d, 7d, 30d) or lookback")
        return self

    @field_validator("pod_pattern")
    @classmethod
    def _known_placeholders(cls, value: str) -> str:
        return _check_pod_pattern(value)

    def read_items(self) -> tuple[str, ...]:
        return (*self.types, *((BASIC,) if self.pod_details else ()))

    def needs_secret(self, name: str) -> bool:
        # The access key pair signs the job list only.
        return name == "api_key" or self.discovery == "list"

    def completed(self, secrets: Mapping[str, SecretStr]) -> Self:
        # A `lookback` replaces the default `period`: Alaya takes one window or the other.
        window: dict[str, object] = {"period": None} if self.lookback is not None else {}
        return self.model_copy(update={**secrets, **window})
