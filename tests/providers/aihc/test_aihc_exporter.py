"""The whole exporter (aiohttp app, scheduler, store, exposition) on the simulated AIHC."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Settings
from exporter.logs import configure_logging
from exporter.metrics import KNOWN_JOB_STATUSES
from exporter.providers.aihc.target import AIHC_METRIC_TYPES, METRIC_BY_TYPE
from exporter.redaction import redactor
from exporter.server import build_app
from exporter.simulator.aihc import (
    DEMO_ACCESS_KEY_ID,
    DEMO_SECRET_ACCESS_KEY,
    SECRET_MARK,
    AihcWorld,
)
from exporter.simulator.aihc_jobs import SimPod
from tests.providers.aihc.aihc_helpers import QUEUES, Harness, jobs

ClientFactory = Callable[[web.Application], Awaitable[TestClient[Any, Any]]]

WEIRD_NAMES = (
    'quote " inside',
    "back\\slash \\n not a newline",
    "real\nnewline",
    "训练任务-预训练-百舸",
    'all of "them"\\\n任务',
)


async def scrape(harness: Harness, aiohttp_client: ClientFactory, **target: Any) -> str:
    settings = Settings(aihc=[harness.target(**target)], poll_interval=3600)
    client = await aiohttp_client(build_app(settings))
    for _ in range(300):
        if (await client.get("/-/ready")).status == 200:
            break
        await asyncio.sleep(0.05)
    response = await client.get("/metrics")
    assert response.status == 200
    return await response.text()


def families(text: str) -> dict[str, list[Any]]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@jobs(5)
async def test_three_queues_of_jobs_export_every_job_once(
    harness: Harness, world: AihcWorld, aiohttp_client: ClientFactory
) -> None:
    """Five jobs (2, 2 and 1 in the three queues) listed in three pages."""
    text = await scrape(harness, aiohttp_client, page_size=2)
    found = families(text)
    jobs = set(world.jobs)
    pods = {p.name for j in world.jobs.values() for p in j.pods}
    info = found["training_job_info"]
    assert sorted(s.labels["job_id"] for s in info) == sorted(jobs)
    assert {s.labels["queue"] for s in info} == set(QUEUES)
    status = found["training_job_status"]
    assert len(status) == 5 * len(KNOWN_JOB_STATUSES)
    current = Counter(s.labels["job_id"] for s in status if s.value == 1)
    assert current == dict.fromkeys(jobs, 1)
    assert {s.labels["status"] for s in status if s.value == 1} == {"Running"}
    assert len(found["training_job_created_timestamp_seconds"]) == 5
    assert [s.value for s in found["training_job_replicas"]] == [2.0] * 5
    for name in (
        "training_pod_info",
        "training_pod_restarts",
        "training_pod_last_sample_timestamp_seconds",
    ):
        assert sorted(s.labels["pod"] for s in found[name]) == sorted(pods), name
    phases = found["training_pod_phase"]
    assert {s.labels["pod"] for s in phases if s.value == 1} == pods
    for metric_type in AIHC_METRIC_TYPES:
        series = found[METRIC_BY_TYPE[metric_type]]
        assert sorted(s.labels["pod"] for s in series) == sorted(pods), metric_type
    events = found["training_job_events"]
    assert {s.labels["job_id"] for s in events if s.name == "training_job_events_total"} == jobs
    assert {s.labels["job_id"] for s in found["training_job_last_event_timestamp_seconds"]} == jobs
    up = [s for s in found["training_exporter_up"] if s.labels["provider"] == "aihc"]
    assert [(s.labels["target"], s.value) for s in up] == [("aihc-test", 1.0)]
    requests = sum(
        s.value
        for s in found["training_exporter_api_requests"]
        if s.name == "training_exporter_api_requests_total" and s.labels["provider"] == "aihc"
    )
    assert requests == 3 + 5 * (1 + 22 + 1) == len(harness.simulator.log.entries)


@jobs(2)
async def test_odd_data_passes_promtool(
    harness: Harness, world: AihcWorld, aiohttp_client: ClientFactory
) -> None:
    """The odd jobs beside two plain ones, of all 22 metric types."""
    for i, name in enumerate(WEIRD_NAMES):
        job = world.add_job(queue=QUEUES[i % 3], name=name, pods=[SimPod(f"{name}-pod", ip=name)])
        job.values[("GpuUsage", f"{name}-pod")] = ["", "NaN", "abc", "87.5"]
    world.add_job(queue=QUEUES[0], status="Hibernating 休眠", finished_at="")
    quiet = world.add_job(queue=QUEUES[1])
    quiet.pods[0].samples = False
    text = await scrape(harness, aiohttp_client)
    result = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "" and result.stderr.strip() == ""
    found = families(text)
    names = {s.labels["job_name"] for s in found["training_job_info"]}
    assert set(WEIRD_NAMES) <= names
    gpu = {s.labels["pod"]: s.value for s in found["training_pod_gpu_utilization_ratio"]}
    assert all(gpu[f"{name}-pod"] == 0.875 for name in WEIRD_NAMES)
    dropped = {
        s.labels["reason"]: s.value
        for s in found["training_exporter_dropped_values"]
        if s.name.endswith("_total") and s.labels["provider"] == "aihc"
    }
    assert dropped == {"unparsable": 2 * len(WEIRD_NAMES), "not_finite": len(WEIRD_NAMES)}
    assert any(s.labels["status"] == "Hibernating 休眠" for s in found["training_job_status"])


@jobs(3)
async def test_no_secret_reaches_metrics_or_logs(
    harness: Harness, world: AihcWorld, aiohttp_client: ClientFactory
) -> None:
    """Three jobs, each with the secret-bearing fields, of all 22 metric types."""
    stream = io.StringIO()
    configure_logging("debug", "json", stream=stream)
    redactor.add([DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY])
    # Failing calls, so the error path (BCE requestId, messages) is logged too.
    harness.simulator.faults.error_rates = {500: 1.0}
    harness.simulator.faults.only = frozenset({"events"})
    text = await scrape(harness, aiohttp_client)
    logged = stream.getvalue()
    assert "api request failed" in logged and "sim-fault" in logged
    for secret in (SECRET_MARK, DEMO_SECRET_ACCESS_KEY, DEMO_ACCESS_KEY_ID, "bce-auth-v1/"):
        assert secret not in text, secret
        assert secret not in logged, secret
    for line in logged.splitlines():
        json.loads(line)
    for word in ("imageConfig", "envs", "command", "torchrun", "WANDB", "team-secret"):
        assert word not in text
