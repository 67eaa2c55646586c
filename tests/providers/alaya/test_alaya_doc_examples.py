"""The replies printed on Alaya's API page, served verbatim over HTTP to the real provider."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from bench.oneshot import PollResult, read_all
from exporter.model import Reading
from exporter.providers.alaya import AlayaJob, AlayaProvider, AlayaTarget
from exporter.providers.alaya.mapping import PodKey, metric_samples
from exporter.providers.alaya.models import Envelope, MetricsData
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.targets import tier_plan

from .alaya_helpers import FAST, failed_parts, fixture, labels_of, requests, retries, samples

DOC_JOB = "ca78d6b9-e196-5a0f-b1be-ab036b3cb91a"
DOC_CARD = (
    ("provider", "alaya"),
    ("resource_pool", ""),
    ("queue", ""),
    ("job_id", DOC_JOB),
    ("pod", "worker-0"),
    ("gpu", "NVIDIA-H800A-NV-80G-3"),
)


class DocService:
    """Answers every gpu-metrics request with `reply` (HTTP `status`), and records requests."""

    def __init__(self) -> None:
        self.reply: Any = fixture("gpu_metrics_ok.json")
        self.status = 200
        self.seen: list[web.Request] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request)
        return web.json_response(self.reply, status=self.status)


@pytest.fixture
def doc_service() -> DocService:
    return DocService()


@pytest.fixture
async def doc_provider(
    aiohttp_server: Callable[..., Any], doc_service: DocService
) -> AsyncIterator[tuple[AlayaProvider, SelfMetrics]]:
    app = web.Application()
    app.router.add_get("/v1/training/instance/{id}/{pod}/gpu-metrics", doc_service.handle)
    server: TestServer = await aiohttp_server(app)
    target = AlayaTarget(
        name="doc",
        endpoint=str(server.make_url("/")),
        api_key=SecretStr("doc-key-0123"),
        types=["gpu"],
        pod_details=False,
        period="6h",
        jobs=[AlayaJob(id=DOC_JOB, pods=["worker-0"])],
        limits=FAST,
    )
    metrics = SelfMetrics()
    provider = AlayaProvider(target, metrics, tier_plan(target, 60.0))
    yield provider, metrics
    await provider.close()


async def poll(provider: AlayaProvider) -> PollResult:
    return await read_all(provider, PollContext(time.monotonic() + 30, time.time()))


def test_the_success_example_parses() -> None:
    envelope = Envelope.model_validate(fixture("gpu_metrics_ok.json"))
    data = MetricsData.model_validate(envelope.data)
    assert envelope.status == 200
    assert data.start_time == "2025-09-10 12:00:00"
    assert data.end_time == "2025-09-10 18:30:00"
    assert data.series is not None and len(data.series) == 1


@pytest.mark.parametrize("name", ["error_403.json", "error_500.json"])
def test_the_error_examples_parse_to_empty_data(name: str) -> None:
    envelope = Envelope.model_validate(fixture(name))
    assert envelope.status != 200
    assert MetricsData.model_validate(envelope.data).series is None


def test_mapping_of_the_success_example() -> None:
    data = MetricsData.model_validate(fixture("gpu_metrics_ok.json")["data"])
    dropped: list[str] = []
    mapped = metric_samples(PodKey(DOC_JOB, "worker-0"), "gpu", data, dropped.append)

    got = {s.name: s.value for s in mapped.samples}
    # The newest sample (0.95), not currentRate (0.65): see exporter.providers.alaya.mapping.
    assert got == {
        "training_pod_gpu_utilization_ratio": 0.95,
        "training_pod_gpu_utilization_window_max_ratio": 0.93,
        "training_pod_gpu_utilization_window_avg_ratio": 0.7,
    }
    assert mapped.newest_timestamp == 1636457100
    assert mapped.other_pod_names == {"pod_name_master"}
    assert dropped == []


def test_current_rate_stands_in_when_no_sample_parses() -> None:
    reply = fixture("gpu_metrics_ok.json")["data"]
    reply["metricData"][0]["metricData"] = []
    data = MetricsData.model_validate(reply)
    mapped = metric_samples(PodKey(DOC_JOB, "worker-0"), "gpu", data, lambda reason: None)

    assert {s.name: s.value for s in mapped.samples}["training_pod_gpu_utilization_ratio"] == 0.65
    assert mapped.newest_timestamp is None


async def test_success_example_over_http(
    doc_provider: tuple[AlayaProvider, SelfMetrics], doc_service: DocService
) -> None:
    provider, metrics = doc_provider
    result = await poll(provider)

    assert result.ok
    (gpu,) = samples(result, "training_pod_gpu_utilization_ratio")
    # Labelled with the path's pod, not the reply's `pod_name_master`.
    assert tuple(labels_of(gpu).items()) == DOC_CARD
    assert gpu.value == 0.95
    (last,) = samples(result, "training_pod_last_sample_timestamp_seconds")
    assert last.value == 1636457100
    (request,) = doc_service.seen
    assert request.path == f"/v1/training/instance/{DOC_JOB}/worker-0/gpu-metrics"
    assert dict(request.query) == {"type": "gpu", "period": "6h"}
    assert request.headers["Authorization"] == "Bearer doc-key-0123"
    assert requests(metrics, "gpu-metrics", "200") == 1


@pytest.mark.parametrize("http_status", [200, 403])
async def test_403_example_is_an_auth_failure(
    doc_provider: tuple[AlayaProvider, SelfMetrics], doc_service: DocService, http_status: int
) -> None:
    provider, metrics = doc_provider
    doc_service.reply, doc_service.status = fixture("error_403.json"), http_status
    result = await poll(provider)

    assert not result.ok
    assert failed_parts(result) == [(DOC_JOB, "worker-0:gpu")]
    assert len(doc_service.seen) == 1
    assert requests(metrics, "gpu-metrics", "403") == 1
    assert requests(metrics, "gpu-metrics", "200") == 0


@pytest.mark.parametrize("http_status", [200, 500])
async def test_500_example_is_retried_then_fails(
    doc_provider: tuple[AlayaProvider, SelfMetrics], doc_service: DocService, http_status: int
) -> None:
    provider, metrics = doc_provider
    doc_service.reply, doc_service.status = fixture("error_500.json"), http_status
    result = await poll(provider)

    assert failed_parts(result) == [(DOC_JOB, "worker-0:gpu")]
    assert len(doc_service.seen) == 3
    assert requests(metrics, "gpu-metrics", "500") == 3
    assert retries(metrics, "gpu-metrics") == 2


@pytest.mark.parametrize(
    "reply",
    [
        {"status": 200, "message": "OK", "data": {}},
        {"status": 200, "message": "OK"},
        {"status": 200, "message": "OK", "data": None},
        {"status": 200, "message": "OK", "data": {"metricData": None}},
        {"status": 200, "message": "OK", "data": {"metricData": []}},
    ],
)
async def test_empty_data_never_raises(
    doc_provider: tuple[AlayaProvider, SelfMetrics], doc_service: DocService, reply: Any
) -> None:
    provider, _ = doc_provider
    doc_service.reply = reply
    result = await poll(provider)

    assert result.ok
    assert result.jobs[DOC_JOB] == {"worker-0:gpu": Reading((), "fast")}


@pytest.mark.parametrize(
    "reply",
    ["not an envelope", [1, 2], {"status": "ok", "data": [1, 2]}, {"message": "OK"}],
)
async def test_a_foreign_body_is_a_failure_not_a_crash(
    doc_provider: tuple[AlayaProvider, SelfMetrics], doc_service: DocService, reply: Any
) -> None:
    provider, metrics = doc_provider
    doc_service.reply = reply
    result = await poll(provider)

    assert failed_parts(result) == [(DOC_JOB, "worker-0:gpu")]
    assert requests(metrics, "gpu-metrics", "error") == 3


async def test_data_of_the_wrong_shape_is_a_failure(
    doc_provider: tuple[AlayaProvider, SelfMetrics], doc_service: DocService
) -> None:
    provider, metrics = doc_provider
    doc_service.reply = {"status": 200, "message": "OK", "data": {"metricData": "lots"}}
    result = await poll(provider)

    assert failed_parts(result) == [(DOC_JOB, "worker-0:gpu")]
    # A reply that cannot be used is a failed attempt, retried like AIHC's (usually a
    # truncated body), counted as `error`.
    assert len(doc_service.seen) == 3
    assert requests(metrics, "gpu-metrics", "error") == 3
    assert requests(metrics, "gpu-metrics", "200") == 0
    assert retries(metrics, "gpu-metrics") == 2
