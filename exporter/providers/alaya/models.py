"""The shapes of Alaya NeW's replies, as pydantic models.

Every model ignores fields it does not know. Rates and sample values are documented as strings
("0.93"); numbers are accepted too, and turning them into floats is the mapping's job, so that
one bad value is dropped and counted instead of failing the whole reply. Lists are validated
element by element for the same reason (`valid_items`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

# A number as upstream sends it: usually a string, sometimes a JSON number, sometimes garbage.
# Kept raw so that one bad value is dropped and counted, not the whole element refused.
RawNumber = Any

SUCCESS_STATUS = 200


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Envelope(_Lenient):
    """`{status, message, data}`: status 200 is success, anything else a failure."""

    status: int
    message: str = ""
    data: Any = None


class Point(_Lenient):
    timestamp: RawNumber = None
    value: RawNumber = None


class Series(_Lenient):
    """One element of `data.metricData`: a pod, or one card of it for gpu / vram."""

    type: str | None = None
    pod_name: str | None = Field(default=None, alias="podName")
    max_rate: RawNumber = Field(default=None, alias="maxRate")
    avg_rate: RawNumber = Field(default=None, alias="avgRate")
    current_rate: RawNumber = Field(default=None, alias="currentRate")
    gpu_name: str | None = Field(default=None, alias="gpuName")
    # Raw elements: each is validated as a Point on its own.
    points: list[Any] | None = Field(default=None, alias="metricData")


class MetricsData(_Lenient):
    """`data` of a gpu-metrics reply. `{}` (what error replies carry) is an empty result."""

    series: list[Any] | None = Field(default=None, alias="metricData")
    start_time: str | None = Field(default=None, alias="startTime")
    end_time: str | None = Field(default=None, alias="endTime")


class PodBasic(_Lenient):
    """`data` of a pod's basic reply."""

    status: str | None = None
    restart_count: RawNumber = Field(default=None, alias="restartCount")
    host_ip: str | None = Field(default=None, alias="hostIp")
    pod_ip: str | None = Field(default=None, alias="podIp")
    host_name: str | None = Field(default=None, alias="hostName")
    namespace: str | None = None
    create_time: str | None = Field(default=None, alias="createTime")


Model = TypeVar("Model", bound=BaseModel)


def valid_items(model: type[Model], raw: list[Any] | None) -> Iterator[Model | None]:
    """Each element of `raw` as `model`, or None where it does not fit (the caller counts it)."""
    for item in raw or ():
        try:
            yield model.model_validate(item)
        except Exception:  # ValidationError, or anything else odd input makes: that item only
            yield None


def _number_as_text(value: object) -> object:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _job_id(value: str) -> str:
    if not 1 <= len(value) <= 256:
        raise ValueError("a job id has 1 to 256 characters")
    return value


class JobResource(_Lenient):
    worker_count: RawNumber = Field(default=None, alias="workerCount")


class JobRecord(_Lenient):
    """One job of the (undocumented) job list; times are local time, `YYYY-MM-DD HH:MM:SS`."""

    # Length checked in Python: pydantic-core's constraints refuse a lone surrogate (an
    # invalid byte in the reply), which would drop the job for its odd id.
    id: Annotated[str, BeforeValidator(_number_as_text), AfterValidator(_job_id)]
    name: str | None = None
    status: str | None = None
    # A number in the replies seen; kept raw and compared as text.
    aidc_id: RawNumber = Field(default=None, alias="aidcId")
    resource: JobResource | None = None
    # Raw, like numbers: one odd time drops that sample, not the job.
    created_time: Any = Field(default=None, alias="createdTime")
    start_time: Any = Field(default=None, alias="startTime")
    end_time: Any = Field(default=None, alias="endTime")
    finish_time: Any = Field(default=None, alias="finishTime")

    @property
    def finished_time(self) -> Any:
        return self.end_time or self.finish_time


class JobPage(_Lenient):
    """`data` of a job list reply: one page of records and the total over every page."""

    records: list[Any] = Field(max_length=10_000)
    total_rows: int = Field(alias="totalRows", ge=0)
