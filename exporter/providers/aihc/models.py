"""The AIHC replies we read, as pydantic models: unknown fields ignored, wrong shapes refused.

A reply that does not fit (a list where an object belongs, truncated JSON) raises
`ReplyError`, which fails that one call; an element of one of its lists that does not fit (a
job or a pod without its id) is dropped alone and counted (`kit.decode.each`). Values and
timestamps stay raw here (upstream sends numbers as strings, sometimes not numbers at all):
`exporter.providers.aihc.mapping` parses them one by one, so one bad value never costs the
rest of a reply.

Strings may hold lone surrogates (an invalid byte in the reply, see
`exporter.providers.kit.decode`): pydantic-core's length constraints refuse those, which would
refuse a whole reply for one odd pod name, so "not empty" is checked in Python (`Name`).

Field names come in two spellings: the documentation's examples
(`shared/provider-docs/aihc-*.txt`: `jobId`, `queueId`, `jobSpec`, pods with `podPhase`) and
Baidu's generated SDK (`baiducloud-python-sdk-aihc` 0.0.4: `jobid`, `queue`, `Job`, pods with
only `status`). Which one a live pool sends is not known, and a reply in the SDK's spelling
read with the documentation's alone exports 0 of its jobs (each refused for want of `jobId`),
so every field read accepts both (`AliasChoices`, the documentation's first);
`tests/providers/aihc/test_aihc_spellings.py` checks the names against the SDK's models.

DescribeJobMetrics, 88 % of the calls under `bench.polling`, is read into tuples
(`DescribeJobMetricsReply`): a clean reply on a fast path of plain type checks, anything else
by its model (`metrics_by_model`), which is the definition of what a reply means.

Secret-bearing fields (`jobSpec.imageConfig`, `envs`, `command`, `labels`) are not modelled,
so they are dropped at the boundary and cannot reach a label or a log.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, NamedTuple, TypeVar

from pydantic import AfterValidator, AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field

from exporter.providers.kit.decode import InvalidReply, Tolerant, decode_json, each, validate
from exporter.providers.kit.numbers import INVALID_ITEM, INVALID_SAMPLE, INVALID_SERIES


class ReplyError(InvalidReply):
    """A reply that is not the JSON shape the endpoint documents."""


def _text(value: object) -> object:
    """Strings as they are; null as ""; numbers as their decimal text. Anything else fails."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return value


def _not_empty(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return value


Text = Annotated[str, BeforeValidator(_text)]
# A name that must be there (an id): not empty, whatever characters it holds.
Name = Annotated[str, BeforeValidator(_text), AfterValidator(_not_empty)]
# A number as upstream sent it: a string (the documented form) or a JSON number.
RawNumber = str | int | float | None


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)


class _Reply(_Model, Tolerant):
    """A whole reply: it carries the drop counts. The models inside it do not, so that a
    reply's thousands of points skip pydantic's private-attribute set-up (11 us each)."""


def _object(value: object) -> object:
    return {} if value is None else value


def _list_or_none(value: object) -> object:
    """A list as it is; anything else (an object where a list belongs) as absent."""
    return value if isinstance(value, list) else None


class Resource(_Model):
    """One entry of `jobSpec.resources`: `baidu.com/a800_80g_cgpu` and its quantity per pod."""

    name: Text = ""
    quantity: RawNumber = None


class JobSpec(_Model):
    image: Text = ""
    replicas: RawNumber = None
    resources: Annotated[
        list[Resource] | None, BeforeValidator(_list_or_none), each(INVALID_ITEM)
    ] = None


class TimeLineEntry(_Model):
    """One entry of the SDK's `jobTimeLine`: when the job entered a status."""

    time: Text = ""
    condition_type: Text = Field(default="", alias="conditionType")


class Pod(_Model):
    name: Name
    # The SDK's pod has no `podPhase`: its `status` is the phase (see mapping.pod_phase).
    pod_phase: Text = Field(default="", alias="podPhase")
    status: Text = ""
    replica_type: Text = Field(default="", alias="replicaType")
    restart_count: RawNumber = Field(default=None, alias="restartCount")
    node_name: Text = Field(default="", alias="nodeName")
    pod_ip: Text = Field(default="", validation_alias=AliasChoices("PodIP", "podIP", "podIp"))
    # Why the pod failed (the SDK's `reason`; the documentation's example has it empty).
    reason: Text = ""


class Job(_Model):
    job_id: Name = Field(validation_alias=AliasChoices("jobId", "jobid"))
    name: Text = ""
    status: Text = ""
    created_at: Text = Field(default="", alias="createdAt")
    finished_at: Text = Field(default="", alias="finishedAt")
    job_type: Text = Field(default="", alias="jobType")
    resource_pool_id: Text = Field(default="", alias="resourcePoolId")
    queue_id: Text = Field(default="", validation_alias=AliasChoices("queueId", "queueID", "queue"))
    priority: Text = ""
    user_id: Text = Field(default="", alias="userId")
    job_spec: Annotated[JobSpec, BeforeValidator(_object)] = Field(
        default_factory=JobSpec, validation_alias=AliasChoices("jobSpec", "Job")
    )
    # Not in the documented tables; live replies carry them (see docs/providers.md).
    gpu_utilization_percent: RawNumber = Field(default=None, alias="gpuUtilizationPercent")
    gpu_memory_utilization_percent: RawNumber = Field(
        default=None, alias="gpuMemoryUtilizationPercent"
    )
    run_time_nanoseconds: RawNumber = Field(default=None, alias="runTimeNanoseconds")
    # The SDK's status timeline (DescribeJob; the list does not carry it).
    time_line: Annotated[
        list[TimeLineEntry] | None, BeforeValidator(_list_or_none), each(INVALID_ITEM)
    ] = Field(default=None, alias="jobTimeLine")


class JobDetail(Job, _Reply):
    pods: Annotated[list[Pod] | None, each(INVALID_ITEM)] = None


class DescribeJobsReply(_Reply):
    request_id: Text = Field(default="", alias="requestId")
    # Optional: without it, paging stops at the first short page.
    total_count: int | None = Field(default=None, alias="totalCount", ge=0)
    jobs: Annotated[list[Job] | None, each(INVALID_ITEM)] = None


class _PointModel(_Model):
    time: RawNumber = None
    value: RawNumber = None


class _SeriesModel(_Model):
    pod_name: Name = Field(alias="podName")
    metrics: Annotated[list[_PointModel] | None, each(INVALID_SAMPLE)] = None


class _MetricsModel(_Reply):
    request_id: Text = Field(default="", alias="requestId")
    job_id: Text = Field(default="", alias="jobId")
    metrics: Annotated[list[_SeriesModel] | None, each(INVALID_SERIES)] = None


class MetricPoint(NamedTuple):
    time: RawNumber
    value: RawNumber


class PodSeries(NamedTuple):
    pod_name: str
    metrics: tuple[MetricPoint, ...]


# The NamedTuples' own __new__ is a Python function; a clean reply builds one a point.
_point = functools.partial(tuple.__new__, MetricPoint)
_pod_series = functools.partial(tuple.__new__, PodSeries)


@dataclass(frozen=True, slots=True)
class DescribeJobMetricsReply:
    """DescribeJobMetrics as plain tuples: the reply the exporter reads most (88 % of
    calls), read as `_MetricsModel` says, and made of tuples because building its models
    cost 40 of the 55 us a steady-state reply (8 pods, 2 points) took to parse."""

    metrics: tuple[PodSeries, ...]
    dropped: Mapping[str, int]


class Event(_Model):
    reason: Text = ""
    message: Text = ""
    first_timestamp: Text = Field(default="", alias="firstTimestamp")
    last_timestamp: Text = Field(default="", alias="lastTimestamp")
    count: RawNumber = None
    type: Text = ""


class JobEventsReply(_Reply):
    events: Annotated[list[Event] | None, each(INVALID_ITEM)] = None
    total: int | None = None


_M = TypeVar("_M", bound=BaseModel)


def _load(body: bytes) -> Any:
    return decode_json(body, error=ReplyError)


def _validate(model: type[_M], data: Any) -> _M:
    return validate(model, data, error=ReplyError)


def parse_describe_jobs(body: bytes) -> DescribeJobsReply:
    return _validate(DescribeJobsReply, _load(body))


def parse_describe_job(body: bytes) -> JobDetail:
    """DescribeJob: the page's table nests the job under `job`, its example has it top-level."""
    data = _load(body)
    if isinstance(data, dict) and isinstance(data.get("job"), dict):
        nested = dict(data["job"])
        if "pods" not in nested and "pods" in data:
            nested["pods"] = data["pods"]
        data = nested
    return _validate(JobDetail, data)


def parse_describe_job_metrics(body: bytes) -> DescribeJobMetricsReply:
    """A clean reply is read by `clean_metrics`; anything it does not vouch for by
    `metrics_by_model`, which decides what odd replies mean (tests compare the two)."""
    data = _load(body)
    clean = clean_metrics(data)
    if clean is not None:
        return clean
    return metrics_by_model(data)


def metrics_by_model(data: Any) -> DescribeJobMetricsReply:
    """Decoded JSON read by `_MetricsModel`: the definition of what a reply means. Raises
    `ReplyError` when it is not a metrics reply."""
    model = _validate(_MetricsModel, data)
    return DescribeJobMetricsReply(
        tuple(
            PodSeries(s.pod_name, tuple(MetricPoint(p.time, p.value) for p in s.metrics or ()))
            for s in model.metrics or ()
        ),
        model.dropped,
    )


def clean_metrics(data: Any) -> DescribeJobMetricsReply | None:
    """The reply when every value in it is of a type `_MetricsModel` keeps as it is (strings,
    numbers but booleans, nulls), so that the model could not drop, refuse or convert any of
    it; None when it is anything else. Field names as keys (`pod_name`) are left to the model,
    which accepts them too (`populate_by_name`)."""
    if type(data) is not dict or "request_id" in data or "job_id" in data:
        return None
    if not _plain(data.get("requestId")) or not _plain(data.get("jobId")):
        return None
    listed = data.get("metrics")
    if listed is None:
        return DescribeJobMetricsReply((), {})
    if type(listed) is not list:
        return None
    series: list[PodSeries] = []
    for item in listed:
        if type(item) is not dict or "pod_name" in item:
            return None
        name = item.get("podName")
        if type(name) is not str or not name:
            return None
        points = item.get("metrics")
        if points is None:
            series.append(_pod_series((name, ())))
            continue
        if type(points) is not list:
            return None
        kept: list[MetricPoint] = []
        for point in points:
            if type(point) is not dict:
                return None
            at, value = point.get("time"), point.get("value")
            if type(at) not in _NUMBER or type(value) not in _NUMBER:
                return None
            kept.append(_point((at, value)))
        series.append(_pod_series((name, tuple(kept))))
    return DescribeJobMetricsReply(tuple(series), {})


# Types a `RawNumber` keeps unchanged (a boolean becomes 1 or 0, so the model decides).
_NUMBER: Final = frozenset({str, int, float, type(None)})


def _plain(value: object) -> bool:
    """A `Text` value the model keeps as it is."""
    return value is None or type(value) is str


def parse_job_events(body: bytes) -> JobEventsReply:
    return _validate(JobEventsReply, _load(body))


class BceError(_Model):
    request_id: Text = Field(default="", validation_alias=AliasChoices("requestId", "request_id"))
    code: Text = ""
    message: Text = ""


def parse_error(body: bytes) -> BceError | None:
    """BCE's `{requestId, code, message}` error body, or None when it is something else."""
    try:
        return _validate(BceError, _load(body))
    except ReplyError:
        return None
