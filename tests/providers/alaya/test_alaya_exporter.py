"""The whole exporter polling the Alaya simulator: /metrics, staleness, and the API key."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from exporter.config import Settings
from exporter.providers.alaya import AlayaProvider
from exporter.providers.alaya.client import AlayaClient, window_for
from exporter.scheduler import Scheduler
from exporter.selfmetrics import SelfMetrics
from exporter.server import build_app
from exporter.simulator.alaya import AlayaFault, AlayaWorld, ErrorForm
from exporter.store import SnapshotStore
from exporter.targets import tier_plan
from exporter.transport.iface import ApiError
from exporter.work.runner import TargetRunner
from tests.runner_helpers import SteppedClock, poll_once

from .alaya_helpers import T0, make_target, newest_sample_time, poll

SECRET = "sk-alaya-7f3c9e1b2d4a6f8e0c1b3d5f7a9e2c4b"


async def scrape_when_ready(client: TestClient[Any, Any]) -> tuple[str, str]:
    """(/metrics, /) once the first poll of every target is done."""
    for _ in range(200):
        if (await client.get("/-/ready")).status == 200:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("exporter never became ready")
    metrics = await (await client.get("/metrics")).text()
    landing = await (await client.get("/")).text()
    return metrics, landing


def series(exposition: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    found: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def app_for(url: str, world: AlayaWorld, **overrides: Any) -> Any:
    target = make_target(url, world, **overrides)
    return build_app(Settings(alaya=[target], poll_interval=60))


async def test_exporter_serves_every_card_and_pod(
    aiohttp_client: Callable[..., Any], alaya_url: str, world: AlayaWorld
) -> None:
    client = await aiohttp_client(app_for(alaya_url, world))
    exposition, landing = await scrape_when_ready(client)

    got = series(exposition)
    assert len(got["training_pod_gpu_utilization_ratio"]) == 2 * 4 * 8
    assert len(got["training_pod_gpu_memory_utilization_ratio"]) == 2 * 4 * 8
    assert len(got["training_pod_cpu_utilization_ratio"]) == 2 * 4
    assert len(got["training_pod_memory_utilization_ratio"]) == 2 * 4
    assert len(got["training_pod_gpu_utilization_window_avg_ratio"]) == 2 * 4 * 8
    assert len(got["training_pod_phase"]) >= 2 * 4
    t = newest_sample_time(world, 900)
    for labels, value in got["training_pod_gpu_memory_utilization_ratio"].items():
        d = dict(labels)
        card = world.card_names().index(d["gpu"])
        assert value == world.value(d["job_id"], d["pod"], "vram", card, t)
        assert d["provider"] == "alaya" and d["resource_pool"] == "" and d["queue"] == ""
    for labels in got["training_pod_cpu_utilization_ratio"]:
        assert "gpu" not in dict(labels)
    up = got["training_exporter_up"]
    assert up == {(("provider", "alaya"), ("target", "alaya-test")): 1.0}
    assert got["training_alaya_query_window_seconds"] == {
        (("provider", "alaya"), ("target", "alaya-test")): 900.0
    }
    assert "alaya-test" in landing and alaya_url in landing


@pytest.mark.parametrize("form", ["body", "http"])
async def test_api_key_never_leaks(
    aiohttp_client: Callable[..., Any],
    alaya_url: str,
    world: AlayaWorld,
    json_logs: io.StringIO,
    form: ErrorForm,
) -> None:
    # The upstream even quotes the rejected key back in its message.
    world.auth_error_form = form
    world.echo_rejected_key = True
    client = await aiohttp_client(app_for(alaya_url, world, api_key=SecretStr(SECRET)))
    exposition, landing = await scrape_when_ready(client)

    assert series(exposition)["training_exporter_up"] == {
        (("provider", "alaya"), ("target", "alaya-test")): 0.0
    }
    assert "training_pod_gpu_utilization_ratio" not in series(exposition)
    logs = json_logs.getvalue()
    assert "api request failed" in logs and "403" in logs
    for text in (logs, exposition, landing):
        assert SECRET not in text
        assert SECRET[:16] not in text


async def test_api_key_is_not_in_errors(alaya_url: str, world: AlayaWorld) -> None:
    world.echo_rejected_key = True
    target = make_target(alaya_url, world, api_key=SecretStr(SECRET))
    client = AlayaClient(target, SelfMetrics())
    job_id, pods = next(iter(world.jobs.items()))
    try:
        with pytest.raises(ApiError) as caught:
            await client.gpu_metrics(job_id, pods[0], "gpu", window_for(target, T0))
    finally:
        await client.close()
    error = caught.value
    assert error.code == "403" and error.auth
    assert "invalid API key" in error.message
    for text in (str(error), repr(error), error.message, repr(error.args)):
        assert SECRET not in text


async def test_api_key_not_logged_on_success_and_retries(
    alaya_url: str, world: AlayaWorld, json_logs: io.StringIO
) -> None:
    # Three 500s, each answered by a retry: warnings are logged, the poll still succeeds.
    world.faults.append(AlayaFault("status", status=500, form="body", times=3))
    target = make_target(alaya_url, world)
    provider = AlayaProvider(target, SelfMetrics(), tier_plan(target, 60.0))
    try:
        result = await poll(provider)
    finally:
        await provider.close()
    assert result.ok
    logs = json_logs.getvalue()
    assert logs.count("api request failed") == 0
    assert world.api_key not in logs


async def test_a_failed_call_keeps_its_last_good_series(alaya_url: str, world: AlayaWorld) -> None:
    metrics = SelfMetrics()
    store = SnapshotStore()
    target = make_target(alaya_url, world)
    provider = AlayaProvider(target, metrics, tier_plan(target, 60.0))
    clock = SteppedClock()
    # Kept for an hour: a poll moves the runner's clock on by 16 rounds (960 s).
    poller = TargetRunner(
        provider,
        store,
        metrics,
        budget=None,
        workers=8,
        stale_after=3600,
        clock=clock,
        sleep=clock.sleep,
    )
    scheduler = Scheduler([poller])
    job_id = next(iter(world.jobs))
    try:
        scheduler.start()
        await asyncio.wait_for(poller.ready.wait(), 30)
        world.clock = lambda: T0 + 300
        world.faults.append(
            AlayaFault("status", status=500, job=job_id, pod="worker-2", type="gpu")
        )
        await poll_once(poller, clock)
    finally:
        await scheduler.stop()

    snapshot = store.get("alaya", "alaya-test")
    gpu = {
        s.label_values: s.value
        for s in snapshot.samples()
        if s.name == "training_pod_gpu_utilization_ratio"
    }
    assert len(gpu) == 2 * 4 * 8
    old_t, new_t = newest_sample_time(world, 900), newest_sample_time(world, 900, T0 + 300)
    stale = ("alaya", "", "", job_id, "worker-2", "NVIDIA-H800A-NV-80G-5")
    fresh = ("alaya", "", "", job_id, "worker-1", "NVIDIA-H800A-NV-80G-5")
    assert gpu[stale] == world.value(job_id, "worker-2", "gpu", 5, old_t)
    assert gpu[fresh] == world.value(job_id, "worker-1", "gpu", 5, new_t)
    registry = metrics.registry
    labels = {"provider": "alaya", "target": "alaya-test"}
    assert registry.get_sample_value("training_exporter_up", labels) == 0
    assert registry.get_sample_value("training_exporter_stale_parts", labels) == 1
    # The pod's newest sample time still moved on: its other types answered.
    last = {
        s.label_values[4]: s.value
        for s in snapshot.samples()
        if s.name == "training_pod_last_sample_timestamp_seconds" and s.label_values[3] == job_id
    }
    assert last["worker-2"] == new_t


async def test_a_differing_reply_pod_name_is_logged_once_per_pod(
    alaya_url: str, world: AlayaWorld, json_logs: io.StringIO
) -> None:
    world.reply_pod_name = lambda job_id, pod: "pod_name_master"
    target = make_target(alaya_url, world)
    provider = AlayaProvider(target, SelfMetrics(), tier_plan(target, 60.0))
    try:
        await poll(provider)
        await poll(provider)
    finally:
        await provider.close()
    events = [
        json.loads(line)
        for line in json_logs.getvalue().splitlines()
        if "another pod than the path" in line
    ]
    assert len(events) == 2 * 4
    assert {e["level"] for e in events} == {"debug"}
    assert {tuple(e["reply_pod_names"]) for e in events} == {("pod_name_master",)}
