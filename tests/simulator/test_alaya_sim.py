"""The simulator's Alaya side over HTTP: data, both time forms, bearer check, faults."""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from exporter.simulator import Simulator, running
from exporter.simulator.alaya import (
    DEMO_ACCESS_KEY_ID,
    DEMO_API_KEY,
    DEMO_SECRET_ACCESS_KEY,
    AlayaFault,
    AlayaWorld,
    ErrorForm,
)

T0 = 1_757_499_200  # 2025-09-10 18:13:20 +08:00
AUTH = {"Authorization": f"Bearer {DEMO_API_KEY}"}


@pytest.fixture
def world() -> AlayaWorld:
    return AlayaWorld(seed=5, job_count=2, pods_per_job=4, cards_per_pod=8, clock=lambda: T0)


@pytest.fixture
async def base(world: AlayaWorld) -> AsyncIterator[str]:
    async with running(Simulator(seed=5, alaya=world)) as served:
        yield served.url


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


async def get(
    session: aiohttp.ClientSession,
    url: str,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    async with session.get(url, params=params, headers=AUTH if headers is None else headers) as r:
        return r.status, await r.json()


def metrics_url(base: str, world: AlayaWorld, job: int = 0, pod: str = "worker-0") -> str:
    job_id = list(world.jobs)[job]
    return f"{base}/v1/training/instance/{job_id}/{pod}/gpu-metrics"


def test_jobs_pods_and_cards_are_seeded() -> None:
    a, b = AlayaWorld(seed=9, pods_per_job=4), AlayaWorld(seed=9, pods_per_job=4)
    assert a.jobs == b.jobs
    assert len(a.jobs) == 2 and all(p == [f"worker-{i}" for i in range(4)] for p in a.jobs.values())
    assert AlayaWorld(seed=10).jobs.keys() != a.jobs.keys()
    job = next(iter(a.jobs))
    assert a.value(job, "worker-1", "gpu", 2, T0) == b.value(job, "worker-1", "gpu", 2, T0)
    assert a.card_names()[3] == "NVIDIA-H800A-NV-80G-3"


def test_demo_world_is_two_jobs_with_a_few_pods() -> None:
    world = Simulator(seed=42).alaya
    assert world is not None
    assert AlayaWorld(seed=42).jobs == world.jobs
    assert len(world.jobs) == 2
    assert all(2 <= len(pods) <= 4 for pods in world.jobs.values())


def test_curves_are_plausible(world: AlayaWorld) -> None:
    times = range(T0 - 6 * 3600, T0, 60)
    for job_id, pods in world.jobs.items():
        for metric_type in ("gpu", "vram", "cpu", "memory"):
            values = [world.value(job_id, pods[0], metric_type, 0, t) for t in times]
            assert all(0.0 <= v <= 1.0 for v in values)
            assert len(set(values)) > 10, "a curve, not a constant"
        gpu = [world.value(job_id, pods[0], "gpu", 0, t) for t in times]
        cpu = [world.value(job_id, pods[0], "cpu", None, t) for t in times]
        assert sum(gpu) / len(gpu) > sum(cpu) / len(cpu), "training jobs are GPU-bound"
        assert min(gpu) < 0.5 * max(gpu), "checkpoints stall the GPUs now and then"


async def test_gpu_reply_has_one_element_per_card(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    status, body = await get(session, metrics_url(base, world), {"type": "gpu", "period": "15m"})

    assert status == 200 and body["status"] == 200 and body["message"] == "OK"
    elements = body["data"]["metricData"]
    assert [e["gpuName"] for e in elements] == [f"NVIDIA-H800A-NV-80G-{i}" for i in range(8)]
    job_id = next(iter(world.jobs))
    for card, element in enumerate(elements):
        assert element["type"] == "gpu" and element["podName"] == "worker-0"
        points = element["metricData"]
        assert len(points) == 15  # every whole minute of [T0-15m, T0]
        assert all(T0 - 900 <= p["timestamp"] <= T0 for p in points)
        values = [float(p["value"]) for p in points]
        assert values == [
            world.value(job_id, "worker-0", "gpu", card, p["timestamp"]) for p in points
        ]
        assert float(element["maxRate"]) == max(values)
        assert float(element["avgRate"]) == pytest.approx(sum(values) / len(values), abs=1e-4)
        assert float(element["currentRate"]) == values[-1]
        assert all(isinstance(element[k], str) for k in ("maxRate", "avgRate", "currentRate"))
    assert body["data"]["startTime"] == "2025-09-10 17:58:20"
    assert body["data"]["endTime"] == "2025-09-10 18:13:20"


@pytest.mark.parametrize("metric_type", ["cpu", "memory"])
async def test_cpu_and_memory_are_per_pod_without_gpu_name(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession, metric_type: str
) -> None:
    _, body = await get(
        session, metrics_url(base, world, 1, "worker-3"), {"type": metric_type, "period": "1h"}
    )
    (element,) = body["data"]["metricData"]
    assert "gpuName" not in element
    assert element["type"] == metric_type


async def test_start_and_end_time_are_accepted(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    params = {"type": "vram", "startTime": "2025-09-10 12:00:00", "endTime": "2025-09-10 18:30:00"}
    status, body = await get(session, metrics_url(base, world), params)

    assert status == 200 and body["status"] == 200
    points = body["data"]["metricData"][0]["metricData"]
    start = T0 - (6 * 3600 + 13 * 60 + 20)  # 12:00:00 +08:00
    # No samples past the simulator's now (18:13:20), and the spacing keeps replies small.
    assert start <= points[0]["timestamp"] and points[-1]["timestamp"] <= T0
    assert len(points) <= 120
    assert body["data"]["startTime"] == "2025-09-10 12:00:00"


@pytest.mark.parametrize(
    "params",
    [
        {"type": "gpu"},
        {"type": "gpu", "period": "2h"},
        {"type": "disk", "period": "15m"},
        {"type": "gpu", "startTime": "2025-09-10T12:00:00Z", "endTime": "2025-09-10 18:30:00"},
        {"type": "gpu", "startTime": "2025-09-10 18:30:00", "endTime": "2025-09-10 12:00:00"},
    ],
)
async def test_bad_queries_are_400_in_the_body(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession, params: dict[str, str]
) -> None:
    status, body = await get(session, metrics_url(base, world), params)
    assert status == 200 and body["status"] == 400 and body["data"] == {}


@pytest.mark.parametrize("form, http_status", [("body", 200), ("http", 403)])
@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": DEMO_API_KEY}]
)
async def test_a_wrong_or_missing_key_is_403(
    base: str,
    world: AlayaWorld,
    session: aiohttp.ClientSession,
    form: ErrorForm,
    http_status: int,
    headers: dict[str, str],
) -> None:
    world.auth_error_form = form
    status, body = await get(
        session, metrics_url(base, world), {"type": "gpu", "period": "15m"}, headers
    )
    assert (status, body) == (http_status, {"status": 403, "message": "Forbidden", "data": {}})
    job_id = next(iter(world.jobs))
    status, body = await get(
        session, f"{base}/v1/training/instance/{job_id}/worker-0/basic", headers=headers
    )
    assert status == http_status and body["status"] == 403


async def test_unknown_job_or_pod_is_404_in_the_body(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    status, body = await get(
        session, metrics_url(base, world, 0, "worker-9"), {"type": "gpu", "period": "15m"}
    )
    assert status == 200 and body["status"] == 404


async def test_basic_describes_the_pod(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    job_id = list(world.jobs)[1]
    status, body = await get(session, f"{base}/v1/training/instance/{job_id}/worker-2/basic")

    assert status == 200 and body["status"] == 200
    data = body["data"]
    assert data == world.basic(job_id, "worker-2")
    assert data["status"] == "Running" and isinstance(data["restartCount"], int)
    assert set(data) == {
        "status",
        "restartCount",
        "hostIp",
        "podIp",
        "hostName",
        "namespace",
        "createTime",
    }


@pytest.mark.parametrize("form, http_status", [("body", 200), ("http", 500)])
async def test_status_faults_in_both_forms_and_limited_times(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession, form: ErrorForm, http_status: int
) -> None:
    world.faults.append(AlayaFault("status", status=500, form=form, pod="worker-1", times=2))
    url = metrics_url(base, world, 0, "worker-1")
    replies = [await get(session, url, {"type": "cpu", "period": "15m"}) for _ in range(3)]

    expected = {"status": 500, "message": "Internal Server Error", "data": {}}
    assert replies[0] == replies[1] == (http_status, expected)
    assert replies[2][0] == 200 and replies[2][1]["status"] == 200
    # Other pods are untouched.
    _, other = await get(
        session, metrics_url(base, world, 0, "worker-0"), {"type": "cpu", "period": "15m"}
    )
    assert other["status"] == 200


async def test_content_faults(base: str, world: AlayaWorld, session: aiohttp.ClientSession) -> None:
    world.faults += [
        AlayaFault("empty", type="gpu"),
        AlayaFault("empty_data", type="vram"),
        AlayaFault("bad_values", type="cpu"),
        AlayaFault("bad_shape", type="memory"),
    ]
    url = metrics_url(base, world)
    _, gpu = await get(session, url, {"type": "gpu", "period": "15m"})
    _, vram = await get(session, url, {"type": "vram", "period": "15m"})
    _, cpu = await get(session, url, {"type": "cpu", "period": "15m"})
    _, memory = await get(session, url, {"type": "memory", "period": "15m"})

    assert gpu["data"]["metricData"] == []
    assert vram == {"status": 200, "message": "OK", "data": {}}
    first, stray = cpu["data"]["metricData"]
    assert stray == "oops"
    assert (first["maxRate"], first["avgRate"]) == ("NaN", "Infinity")
    assert first["metricData"][-2]["value"] == "n/a"
    assert first["metricData"][-1]["timestamp"] == "later"
    assert not isinstance(memory["data"], dict)


async def test_gpu_without_gpu_name_and_renamed_pods(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    world.faults.append(AlayaFault("no_gpu_name", type="gpu"))
    world.reply_pod_name = lambda job_id, pod: "pod_name_master"
    _, body = await get(session, metrics_url(base, world), {"type": "gpu", "period": "15m"})

    (element,) = body["data"]["metricData"]
    assert "gpuName" not in element
    assert element["podName"] == "pod_name_master"


async def test_requests_are_logged_by_endpoint(
    world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    simulator = Simulator(seed=5, alaya=world)
    async with running(simulator) as served:
        await get(session, metrics_url(served.url, world), {"type": "gpu", "period": "15m"})
        job_id = next(iter(world.jobs))
        await get(session, f"{served.url}/v1/training/instance/{job_id}/worker-0/basic")
    assert simulator.log.count("gpu-metrics") == 1
    assert simulator.log.count("basic") == 1
    (entry, _) = simulator.log.entries
    assert entry.query == {"type": "gpu", "period": "15m"}


# --- the job list ---------------------------------------------------------------------------

LIST = "/api/osm/v1/training/instance/list"


def list_headers(secret: str = DEMO_SECRET_ACCESS_KEY) -> dict[str, str]:
    millis = int(time.time() * 1000)
    digest = hmac.new(secret.encode(), f"{millis}|GET|{LIST}".encode(), hashlib.sha256)
    return {
        "Authorization": f"alayanew-HMAC-SHA256 {DEMO_ACCESS_KEY_ID}:{millis}:{digest.hexdigest()}"
    }


async def list_page(
    session: aiohttp.ClientSession, base: str, page: int, size: int = 3
) -> tuple[int, Any]:
    params = {"pageNo": str(page), "pageSize": str(size)}
    return await get(session, base + LIST, params, list_headers())


async def test_the_list_pages_newest_first_with_a_status_mix(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    pages = [await list_page(session, base, n) for n in (1, 2, 3, 4)]
    assert all(status == 200 and body["status"] == 200 for status, body in pages)
    records = [r for _, body in pages for r in body["data"]["records"]]
    assert {body["data"]["totalRows"] for _, body in pages} == {6}
    assert pages[3][1]["data"]["records"] == []
    assert [r["status"] for r in records] == [
        "RUNNING",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "STOPPED",
        "PENDING",
    ]
    assert [r["id"] for r in records[:2]] == list(world.jobs)
    assert records[0]["resource"]["workerCount"] == 4
    assert records[0]["createdTime"] == world.format_time(world.started_at - 120)
    assert records[3]["finishTime"] and "endTime" not in records[3]
    assert records[2]["endTime"] and records[0]["endTime"] is None
    assert records[5]["startTime"] is None


async def test_jobs_appear_and_finish_by_the_clock(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    soon = world.add_job(pods=1, created=T0 + 60, start=T0 + 120)
    now = world.add_job(pods=2)
    _, body = await list_page(session, base, 1, 100)
    assert [r["id"] for r in body["data"]["records"]][:1] == [now]
    assert soon not in {r["id"] for r in body["data"]["records"]}
    world.clock = lambda: T0 + 90
    _, body = await list_page(session, base, 1, 100)
    assert {r["id"]: r["status"] for r in body["data"]["records"]}[soon] == "PENDING"
    world.finish_job(now, "FAILED", at=T0 + 100)
    world.clock = lambda: T0 + 130
    _, body = await list_page(session, base, 1, 100)
    statuses = {r["id"]: r["status"] for r in body["data"]["records"]}
    assert statuses[soon] == "RUNNING" and statuses[now] == "FAILED"
    # Its pods are served like any other's.
    url = metrics_url(base, world, list(world.jobs).index(soon))
    _, body = await get(session, url, {"type": "cpu", "period": "15m"})
    assert body["status"] == 200 and body["data"]["metricData"]


@pytest.mark.parametrize(
    "kind, check",
    [
        ("repeat_page", lambda data, first: data["records"] == first["records"]),
        ("empty_page", lambda data, first: data["records"] == [] and data["totalRows"] == 6),
        ("grow_total", lambda data, first: data["totalRows"] == 10**9),
    ],
)
async def test_list_faults_hit_the_page_they_name(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession, kind: Any, check: Any
) -> None:
    _, first = await list_page(session, base, 1)
    world.faults.append(AlayaFault(kind, endpoint="list", page=2))
    _, body = await list_page(session, base, 2)
    assert check(body["data"], first["data"])
    _, again = await list_page(session, base, 1)
    assert again == first


async def test_list_errors_in_the_body_and_the_console_page(
    base: str, world: AlayaWorld, session: aiohttp.ClientSession
) -> None:
    world.faults.append(AlayaFault("status", status=40005, endpoint="list", times=1))
    status, body = await list_page(session, base, 1)
    assert status == 200 and body["status"] == 40005
    world.faults.append(AlayaFault("html", endpoint="list", times=1))
    params = {"pageNo": "1", "pageSize": "3"}
    async with session.get(base + LIST, params=params, headers=list_headers()) as r:
        assert r.status == 200 and r.content_type == "text/html"
        assert (await r.text()).startswith("<!DOCTYPE html>")
    status, body = await get(session, base + LIST, params, list_headers("nope"))
    assert status == 401 and body["status"] == 40003
