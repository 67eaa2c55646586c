"""The simulated AIHC answers like the real service: signatures, paging, shapes, types."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from baidubce.auth import bce_v1_signer
from baidubce.auth.bce_credentials import BceCredentials
from pydantic import SecretStr

from bench.oneshot import read_all
from exporter.config import Limits
from exporter.providers.aihc import AihcProvider
from exporter.providers.aihc.signer import Credentials, canonical_time, encode, sign
from exporter.providers.aihc.target import AIHC_METRIC_TYPES, USAGE_TYPES, AihcTarget
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import RunningSimulator, Simulator, running
from exporter.simulator.aihc import (
    DEMO_ACCESS_KEY_ID,
    DEMO_RESOURCE_POOL,
    DEMO_SECRET_ACCESS_KEY,
    SECRET_MARK,
    AihcWorld,
)
from exporter.targets import tier_plan

POOL = "cce-sim0001"
DEMO = Credentials(DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY)


class Api:
    """Signed raw requests, to see exactly what the simulator answers."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url
        self.host = url.removeprefix("http://")

    def headers(
        self,
        method: str,
        path: str,
        params: dict[str, str],
        body: bytes,
        credentials: Credentials = DEMO,
        at: float | None = None,
    ) -> dict[str, str]:
        at = time.time() if at is None else at
        headers = {
            "Host": self.host,
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "x-bce-date": canonical_time(at),
        }
        headers["Authorization"] = sign(credentials, method, path, headers, params, at)
        return headers

    async def v2(
        self,
        action: str,
        body: Any,
        pool: str = POOL,
        queue: str | None = None,
        credentials: Credentials = DEMO,
        at: float | None = None,
    ) -> tuple[int, Any]:
        params = {"action": action, "resourcePoolId": pool}
        if queue is not None:
            params["queueID"] = queue
        raw = json.dumps(body).encode()
        headers = self.headers("POST", "/", params, raw, credentials, at)
        query = "&".join(f"{encode(k)}={encode(v)}" for k, v in params.items())
        async with self.session.post(f"{self.url}/?{query}", data=raw, headers=headers) as resp:
            return resp.status, await resp.json()

    async def events(self, job_id: str, params: dict[str, str]) -> tuple[int, Any]:
        path = f"/api/v1/aijobs/{encode(job_id)}/events"
        headers = self.headers("GET", path, params, b"")
        query = "&".join(f"{encode(k)}={encode(v)}" for k, v in params.items())
        async with self.session.get(f"{self.url}{path}?{query}", headers=headers) as resp:
            return resp.status, await resp.json()


@pytest.fixture
def world() -> AihcWorld:
    return AihcWorld.fixed(seed=5, pools={POOL: ["q1", "q2", "q3"]}, jobs=23)


@pytest.fixture
async def served(world: AihcWorld) -> AsyncIterator[RunningSimulator]:
    async with running(Simulator(seed=5, aihc=world)) as served:
        yield served


@pytest.fixture
async def api(served: RunningSimulator) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, served.url)


async def test_a_request_signed_by_the_official_sdk_is_accepted(api: Api) -> None:
    params = {"action": "DescribeJobs", "resourcePoolId": POOL}
    body = json.dumps({"pageNumber": 1, "pageSize": 5}).encode()
    now = int(time.time())
    headers = {
        b"Host": api.host.encode(),
        b"Content-Type": b"application/json",
        b"Content-Length": len(body),
        b"x-bce-date": canonical_time(now).encode(),
    }
    auth = bce_v1_signer.sign(
        BceCredentials(DEMO_ACCESS_KEY_ID.encode(), DEMO_SECRET_ACCESS_KEY.encode()),
        b"POST",
        b"/",
        headers,
        params,
        now,
    )
    sent = {k.decode(): v.decode() if isinstance(v, bytes) else str(v) for k, v in headers.items()}
    sent["Authorization"] = auth.decode()
    async with api.session.post(
        f"{api.url}/?action=DescribeJobs&resourcePoolId={POOL}", data=body, headers=sent
    ) as resp:
        assert resp.status == 200
        reply = await resp.json()
    assert reply["totalCount"] == 23 and len(reply["jobs"]) == 5


# `off`: the signing time's offset from now, in seconds; in each test's id, so that every
# pytest-xdist worker collects the same ids.
@pytest.mark.parametrize(
    ("credentials", "off", "status", "code"),
    [
        (Credentials(DEMO_ACCESS_KEY_ID, "wrong"), None, 403, "AccessDenied"),
        (Credentials("nobody", DEMO_SECRET_ACCESS_KEY), None, 403, "InvalidAccessKeyId"),
        (DEMO, -3600, 400, "RequestExpired"),
        (DEMO, 3600, 400, "RequestExpired"),
    ],
    # Fixed ids: ids made of the times differ between pytest-xdist's workers, which then
    # refuse to run the suite ("Different tests were collected").
    ids=["wrong-secret", "unknown-key", "an-hour-old", "an-hour-ahead"],
)
async def test_bad_signatures_get_bce_errors(
    api: Api, credentials: Credentials, off: float | None, status: int, code: str
) -> None:
    at = None if off is None else time.time() + off
    got, reply = await api.v2("DescribeJobs", {}, credentials=credentials, at=at)
    assert (got, reply["code"]) == (status, code)
    assert reply["requestId"] and reply["message"]


async def test_missing_malformed_and_tampered_signatures_are_refused(api: Api) -> None:
    url = f"{api.url}/?action=DescribeJobs&resourcePoolId={POOL}"
    async with api.session.post(url, data=b"{}") as resp:
        assert resp.status == 403 and (await resp.json())["code"] == "AccessDenied"
    async with api.session.post(url, data=b"{}", headers={"Authorization": "Bearer x"}) as resp:
        assert resp.status == 400 and (await resp.json())["code"] == "InvalidHTTPAuthHeader"
    # Signed for another pool, sent for this one.
    headers = api.headers("POST", "/", {"action": "DescribeJobs", "resourcePoolId": "other"}, b"{}")
    async with api.session.post(url, data=b"{}", headers=headers) as resp:
        assert resp.status == 403 and (await resp.json())["code"] == "AccessDenied"


async def test_describe_jobs_pages_until_total_count(api: Api, world: AihcWorld) -> None:
    seen: list[str] = []
    for page in (1, 2, 3):
        status, reply = await api.v2("DescribeJobs", {"pageNumber": page, "pageSize": 10})
        assert status == 200 and reply["totalCount"] == 23
        seen += [j["jobId"] for j in reply["jobs"]]
    assert sorted(seen) == sorted(world.jobs) and len(seen) == 23
    _, newest_first = await api.v2("DescribeJobs", {"pageSize": 3})
    _, oldest_first = await api.v2("DescribeJobs", {"pageSize": 3, "order": "asc"})
    ordered = sorted(world.jobs.values(), key=lambda j: j.created_at)
    assert [j["jobId"] for j in oldest_first["jobs"]] == [j.job_id for j in ordered[:3]]
    assert [j["jobId"] for j in newest_first["jobs"]] == [j.job_id for j in ordered[::-1][:3]]
    _, by_queue = await api.v2("DescribeJobs", {"queue": "q2", "pageSize": 100})
    assert by_queue["totalCount"] == 8 and {j["queueId"] for j in by_queue["jobs"]} == {"q2"}
    status, reply = await api.v2("DescribeJobs", {"pageSize": "10"})
    assert (status, reply["code"]) == (400, "MalformedJSON")
    status, reply = await api.v2("DescribeJobs", {}, pool="cce-nope")
    assert status == 404


async def test_replies_carry_the_secret_fields_the_exporter_must_skip(api: Api) -> None:
    _, reply = await api.v2("DescribeJobs", {"pageSize": 1})
    job = reply["jobs"][0]
    assert SECRET_MARK in job["jobSpec"]["imageConfig"]["password"]
    assert SECRET_MARK in json.dumps(job["jobSpec"]["envs"]) and SECRET_MARK in job["command"]
    assert SECRET_MARK in json.dumps(job["labels"])


@pytest.mark.parametrize("shape", ["top", "nested"])
async def test_describe_job_in_both_shapes(api: Api, world: AihcWorld, shape: str) -> None:
    world.describe_job_shape = shape  # type: ignore[assignment]
    job = next(iter(world.jobs.values()))
    status, reply = await api.v2("DescribeJob", {"jobId": job.job_id, "needDetail": True})
    assert status == 200 and reply["requestId"]
    item = reply["job"] if shape == "nested" else reply
    assert item["jobId"] == job.job_id and item["finishedAt"] == ""
    assert [p["name"] for p in item["pods"]] == [p.name for p in job.pods]
    assert {"PodIP", "nodeName", "podPhase", "restartCount", "replicaType"} <= set(item["pods"][0])
    _, plain = await api.v2("DescribeJob", {"jobId": job.job_id})
    assert "pods" not in (plain.get("job") or plain)
    status, _ = await api.v2("DescribeJob", {"jobId": "job-missing"})
    assert status == 404


async def test_describe_job_alternates_shapes_by_default(api: Api, world: AihcWorld) -> None:
    job = next(iter(world.jobs.values()))
    shapes = set()
    for _ in range(4):
        _, reply = await api.v2("DescribeJob", {"jobId": job.job_id})
        shapes.add("job" in reply)
    assert shapes == {True, False}


async def test_metrics_take_strings_and_refuse_numbers(api: Api, world: AihcWorld) -> None:
    job = next(iter(world.jobs.values()))
    end = int(time.time())
    body = {
        "jobId": job.job_id,
        "metricType": "GpuUsage",
        "startTime": end - 600,
        "endTime": end,
        "timeStep": "60",
    }
    status, reply = await api.v2("DescribeJobMetrics", body, queue=job.queue)
    assert (status, reply["code"]) == (400, "MalformedJSON")
    body["startTime"], body["endTime"] = str(end - 600), str(end)
    status, _ = await api.v2("DescribeJobMetrics", body)
    assert status == 400  # queueID is required
    for metric_type in AIHC_METRIC_TYPES:
        body["metricType"] = metric_type
        status, reply = await api.v2("DescribeJobMetrics", body, queue=job.queue)
        assert status == 200 and reply["jobId"] == job.job_id
        assert [s["podName"] for s in reply["metrics"]] == [p.name for p in job.pods]
        for series in reply["metrics"]:
            assert 10 <= len(series["metrics"]) <= 11
            for point in series["metrics"]:
                assert isinstance(point["value"], str) and point["time"] % 60 == 0
                value = float(point["value"])
                if metric_type in USAGE_TYPES:
                    assert 0 <= value <= 100
                elif metric_type == "RDMAHealth":
                    assert value in (0.0, 1.0)
                else:
                    assert value >= 0


async def test_metric_values_are_deterministic(api: Api, world: AihcWorld) -> None:
    job = next(iter(world.jobs.values()))
    end = int(time.time()) // 60 * 60
    body = {
        "jobId": job.job_id,
        "metricType": "GpuTemperature",
        "startTime": str(end - 300),
        "endTime": str(end),
        "timeStep": "60",
    }
    _, first = await api.v2("DescribeJobMetrics", body, queue=job.queue)
    _, second = await api.v2("DescribeJobMetrics", body, queue=job.queue)
    assert first["metrics"] == second["metrics"]
    temperatures = [float(p["value"]) for s in first["metrics"] for p in s["metrics"]]
    assert all(40 <= t <= 90 for t in temperatures)


async def test_events_endpoint_is_signed_and_go_formatted(api: Api, world: AihcWorld) -> None:
    job = next(iter(world.jobs.values()))
    params = {"resourcePoolId": POOL, "jobFramework": "PyTorchJob"}
    status, reply = await api.events(job.job_id, params)
    assert status == 200 and reply["total"] == len(reply["events"]) > 0
    event = reply["events"][0]
    assert set(event) == {"reason", "message", "firstTimestamp", "lastTimestamp", "count", "type"}
    assert event["lastTimestamp"].endswith(" +0000 UTC")
    status, _ = await api.events(job.job_id, {"resourcePoolId": POOL})
    assert status == 400
    url = f"{api.url}/api/v1/aijobs/{job.job_id}/events?resourcePoolId={POOL}"
    async with api.session.get(url) as resp:
        assert resp.status == 403


async def test_a_failed_job_has_failure_events(api: Api, world: AihcWorld) -> None:
    job = world.add_job(queue="q1", status="Failed", finished_at="2025-05-12T12:58:04Z")
    _, reply = await api.events(job.job_id, {"resourcePoolId": POOL, "jobFramework": "PyTorchJob"})
    reasons = {(e["type"], e["reason"]) for e in reply["events"]}
    assert {("Normal", "JobFailed"), ("Warning", "Error")} <= reasons


def test_the_lively_world_is_the_same_for_the_same_seed_and_time() -> None:
    at = 1_767_225_600.0
    one = AihcWorld(seed=42, clock=lambda: at)
    two = AihcWorld(seed=42, clock=lambda: at)
    other = AihcWorld(seed=43, clock=lambda: at)
    ids = [j.job_id for j in one.jobs_in(DEMO_RESOURCE_POOL)]
    assert ids == [j.job_id for j in two.jobs_in(DEMO_RESOURCE_POOL)]
    assert ids != [j.job_id for j in other.jobs_in(DEMO_RESOURCE_POOL)]


@pytest.mark.parametrize("hour", range(0, 24, 3))
def test_the_demo_pool_is_lively_at_any_time(hour: int) -> None:
    at = 1_767_225_600.0 + hour * 3600 + 17 * 60
    world = AihcWorld(seed=42, clock=lambda: at)
    jobs = world.jobs_in(DEMO_RESOURCE_POOL)
    statuses = [j.status_at(at) for j in jobs]
    running = [j for j in jobs if j.status_at(at) == "Running"]
    assert 9 <= len(jobs) <= 16, statuses
    assert 2 <= len(running) <= 4, statuses
    assert all(1 <= len(j.pods) <= 4 for j in jobs)
    assert {j.queue for j in jobs} == {"default", "llm-pretrain", "research"}
    assert set(statuses) & {"Succeeded", "Failed", "Stopped"}


def test_lively_jobs_are_created_run_and_finish_over_time() -> None:
    now = [1_767_225_600.0]
    world = AihcWorld(seed=42, clock=lambda: now[0])
    before = {j.job_id: j.status_at(now[0]) for j in world.jobs_in(DEMO_RESOURCE_POOL)}
    now[0] += 3 * 3600
    after = {j.job_id: j.status_at(now[0]) for j in world.jobs_in(DEMO_RESOURCE_POOL)}
    assert set(after) - set(before), "new jobs appear"
    assert set(before) - set(after), "old jobs leave the list"
    running_before = [j for j, s in before.items() if s == "Running"]
    assert all(after.get(j, "gone") != "Running" for j in running_before)
    job = world.jobs_in(DEMO_RESOURCE_POOL)[-1]
    seen = [job.status_at(t) for t in range(int(job.created_at), int(job.created_at) + 7200, 20)]
    assert (
        seen[0] == "Created"
        and "Running" in seen
        and seen[-1] in {"Succeeded", "Failed", "Stopped"}
    )


async def test_the_demo_world_costs_a_modest_number_of_requests() -> None:
    simulator = Simulator(seed=42, aihc=AihcWorld(seed=42))
    async with running(simulator) as served:
        target = AihcTarget(
            name="demo-aihc",
            endpoint=served.url,
            access_key_id=SecretStr(DEMO_ACCESS_KEY_ID),
            secret_access_key=SecretStr(DEMO_SECRET_ACCESS_KEY),
            resource_pool_id=DEMO_RESOURCE_POOL,
            limits=Limits(requests_per_second=0),
        )
        provider = AihcProvider(target, SelfMetrics(), tier_plan(target, 60.0))
        try:
            result = await read_all(provider, PollContext(time.monotonic() + 30, time.time()))
        finally:
            await provider.close()
    assert result.ok
    running_jobs = [j for j, parts in result.jobs.items() if "metric:GpuUsage" in parts]
    finals = [j for j, parts in result.jobs.items() if "pods" in parts]
    failed = [j for j in finals if j not in running_jobs]
    assert 2 <= len(running_jobs) <= 4 and 9 <= len(result.jobs) <= 16
    # One list page, then 1 detail + 22 metric types + 1 events per running job, and one
    # detail and one events for each failed job, for its failure class.
    assert len(simulator.log.entries) == 1 + 24 * len(running_jobs) + 2 * len(failed) <= 105
