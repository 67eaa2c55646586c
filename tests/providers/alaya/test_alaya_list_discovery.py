"""`discovery: list` through the whole exporter against the simulator's signed job list:
pages, filters, pods, job-level series, faults, and signatures checked here on their own."""

from __future__ import annotations

import hashlib
import hmac
import io
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from pydantic import SecretStr

from exporter.config import Settings
from exporter.providers.alaya import AlayaJob
from exporter.server import build_app
from exporter.simulator import Simulator, running
from exporter.simulator.alaya import (
    DEMO_ACCESS_KEY_ID,
    DEMO_API_KEY,
    DEMO_SECRET_ACCESS_KEY,
    AlayaFault,
    AlayaWorld,
)

from .alaya_helpers import T0, Running, Series, jobs_of, log_events, make_target, pods_of

LIST_PATH = "/api/osm/v1/training/instance/list"
ERRORS = "training_exporter_discovery_errors_total"
NOT_READ = "alaya job list not read; the last good jobs are carried over"
INFO = "training_job_info"


def expected_authorization(secret: str, millis: int) -> str:
    """The formula as the issue gives it, written here from scratch."""
    message = f"{millis}|GET|{LIST_PATH}".encode()
    digest = hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return f"alayanew-HMAC-SHA256 {DEMO_ACCESS_KEY_ID}:{millis}:{digest}"


def signed_correctly(header: str) -> bool:
    millis = int(header.split(":")[1])
    fresh = abs(time.time() * 1000 - millis) < 60_000
    return fresh and header == expected_authorization(DEMO_SECRET_ACCESS_KEY, millis)


class Clock:
    def __init__(self) -> None:
        self.now = float(T0)

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def world(clock: Clock) -> AlayaWorld:
    # 3 running jobs of 2 pods, then a succeeded, a failed, a stopped and a pending job.
    return AlayaWorld(seed=17, job_count=3, pods_per_job=2, cards_per_pod=1, clock=clock)


@pytest.fixture
def simulator(world: AlayaWorld) -> Simulator:
    return Simulator(seed=17, alaya=world)


@pytest.fixture
async def url(simulator: Simulator) -> AsyncIterator[str]:
    async with running(simulator) as served:
        yield served.url


@pytest.fixture
def start(aiohttp_client: Callable[..., Any], url: str, world: AlayaWorld) -> Callable[..., Any]:
    async def make(poll_interval: float = 0.2, **overrides: Any) -> Running:
        fields: dict[str, Any] = {
            "jobs": [],
            "discovery": "list",
            "access_key_id": SecretStr(DEMO_ACCESS_KEY_ID),
            "secret_access_key": SecretStr(DEMO_SECRET_ACCESS_KEY),
            "list_page_size": 2,
            "pod_pattern": "worker-{index}",
            "types": ["cpu"],
            "pod_details": False,
        }
        target = make_target(url, world, **{**fields, **overrides})
        settings = Settings(alaya=[target], poll_interval=poll_interval, stale_after=600)
        client = await aiohttp_client(build_app(settings))
        return Running(client, target.name)

    return make


def running_ids(world: AlayaWorld) -> set[str]:
    return {j.id for j in world.listed if j.status(world.clock()) == "RUNNING"}


def status_of(series: Series, job_id: str) -> str:
    [current] = [
        dict(labels)["status"]
        for labels, value in series["training_job_status"].items()
        if dict(labels)["job_id"] == job_id and value == 1
    ]
    return current


def requests(rig: Running, series: Series, code: str) -> float:
    value = rig.value(series, "training_exporter_api_requests_total", endpoint="list", code=code)
    return value or 0.0


async def first_poll(rig: Running) -> Series:
    """/metrics once the first round's every read is in (/-/ready)."""
    for _ in range(400):
        if (await rig.client.get("/-/ready")).status == 200:
            return await rig.scrape()
        await _sleep()
    raise AssertionError("no first poll")


async def _sleep() -> None:
    import asyncio

    await asyncio.sleep(0.02)


async def test_pages_are_signed_read_whole_and_filtered_to_running_jobs(
    start: Callable[..., Any], world: AlayaWorld, simulator: Simulator
) -> None:
    rig = await start(poll_interval=3600)
    series = await first_poll(rig)

    # 7 records, 2 a page: 4 signed requests, each counted.
    assert simulator.log.count("list") == 4
    assert requests(rig, series, "200") == 4
    assert [e.query["pageNo"] for e in simulator.log.entries if e.endpoint == "list"] == [
        "1",
        "2",
        "3",
        "4",
    ]
    assert len(world.list_authorizations) == 4
    assert all(signed_correctly(h) for h in world.list_authorizations)

    running = running_ids(world)
    assert len(running) == 3
    assert jobs_of(series, INFO) == running
    names = {j.id: j.name for j in world.listed}
    for labels in series[INFO]:
        d = dict(labels)
        assert d["job_name"] == names[d["job_id"]]
        assert d["provider"] == "alaya" and d["resource_pool"] == "" and d["queue"] == ""
    assert {status_of(series, j) for j in running} == {"Running"}
    created = {j.id: j.created for j in world.listed}
    for labels, value in series["training_job_created_timestamp_seconds"].items():
        assert value == created[dict(labels)["job_id"]]
    assert set(series["training_job_replicas"].values()) == {2.0}
    assert "training_job_finished_timestamp_seconds" not in series
    # Pods from the pattern over workerCount, polled for running jobs only.
    assert pods_of(series) == {(j, f"worker-{i}") for j in running for i in range(2)}
    assert rig.value(series, "training_exporter_up", target=rig.target) == 1
    assert rig.count(ERRORS, series) == 0


async def test_the_simulator_checks_the_formula(url: str) -> None:
    """The simulator's check agrees with the formula as written in this test."""
    millis = int(time.time() * 1000)
    async with aiohttp.ClientSession() as session:
        good = {"Authorization": expected_authorization(DEMO_SECRET_ACCESS_KEY, millis)}
        async with session.get(url + LIST_PATH + "?pageNo=1&pageSize=3", headers=good) as r:
            assert r.status == 200
            body = await r.json()
            assert body["status"] == 200 and body["data"]["totalRows"] == 7
            assert len(body["data"]["records"]) == 3
        for header, code in [
            (expected_authorization("wrong-secret", millis), 40003),
            (expected_authorization(DEMO_SECRET_ACCESS_KEY, millis - 600_000), 40002),
            (f"Bearer {DEMO_API_KEY}", 40001),
        ]:
            async with session.get(url + LIST_PATH, headers={"Authorization": header}) as r:
                assert r.status == 401
                assert (await r.json())["status"] == code


async def test_statuses_aidc_and_pods_named_in_the_jobs_file(
    start: Callable[..., Any], world: AlayaWorld, simulator: Simulator, tmp_path: Any
) -> None:
    by_status = {j.status(T0): j.id for j in world.listed}
    rig = await start(poll_interval=3600, list_statuses=["running", "FAILED", "Pending"])
    series = await first_poll(rig)
    failed, pending = by_status["FAILED"], by_status["PENDING"]
    assert jobs_of(series, INFO) == running_ids(world) | {failed, pending}
    assert status_of(series, failed) == "Failed" and status_of(series, pending) == "Pending"
    failed_job = next(j for j in world.listed if j.id == failed)
    finished = series["training_job_finished_timestamp_seconds"]
    assert {dict(k)["job_id"]: v for k, v in finished.items()} == {failed: failed_job.end}
    # metric_statuses stays [Running]: no pod calls for the failed or pending job.
    assert {job for job, _ in pods_of(series)} == running_ids(world)
    assert simulator.log.count("gpu-metrics") == 6

    # aidc_id keeps one data centre's jobs; jobs_file names the pods of a listed job.
    other = world.add_job(pods=3, aidc_id=7)
    path = tmp_path / "pods.yaml"
    path.write_text(f"jobs:\n  - id: {other}\n    pods: [worker-2]\n", encoding="utf-8")
    rig = await start(poll_interval=3600, aidc_id=7, jobs_file=path)
    series = await first_poll(rig)
    assert jobs_of(series, INFO) == {other}
    assert pods_of(series) == {(other, "worker-2")}

    # Without a pattern, a job no jobs entry names gets job-level series only.
    rig = await start(
        poll_interval=3600, pod_pattern="", jobs=[AlayaJob(id=other, pods=["worker-0"])]
    )
    series = await first_poll(rig)
    assert jobs_of(series, INFO) == running_ids(world)
    assert pods_of(series) == {(other, "worker-0")}


async def test_jobs_appear_and_finish_between_polls(
    start: Callable[..., Any], world: AlayaWorld, clock: Clock
) -> None:
    rig = await start()
    first = running_ids(world)
    assert jobs_of(await rig.next_full_poll(), INFO) == first

    new = world.add_job(pods=1)
    series = await rig.next_full_poll()
    assert jobs_of(series, INFO) == first | {new}
    assert (new, "worker-0") in pods_of(series)

    gone = sorted(first)[0]
    world.finish_job(gone, "FAILED")
    series = await rig.next_full_poll()
    assert jobs_of(series, INFO) == (first - {gone}) | {new}
    assert gone not in {job for job, _ in pods_of(series)}
    assert not any(dict(k).get("job_id") == gone for v in series.values() for k in v)

    # A job created, started and ended by the world's clock.
    later = world.add_job(pods=1, created=T0 + 10, start=T0 + 20, end=T0 + 30)
    clock.now = T0 + 15  # listed, but pending
    assert later not in jobs_of(await rig.next_full_poll(), INFO)
    clock.now = T0 + 25
    assert later in jobs_of(await rig.next_full_poll(), INFO)
    clock.now = T0 + 35
    assert later not in jobs_of(await rig.next_full_poll(), INFO)


FAULTS = [
    (AlayaFault("repeat_page", endpoint="list", page=3), "200", "page 3 repeats an earlier page"),
    (
        AlayaFault("empty_page", endpoint="list", page=2),
        "200",
        "page 2 is empty before the total 7",
    ),
    (
        AlayaFault("grow_total", endpoint="list", page=2),
        "200",
        "total 1000000000 is more than 50 pages",
    ),
    (AlayaFault("status", status=40003, endpoint="list"), "40003", "status 40003: Error"),
    (AlayaFault("html", endpoint="list"), "error", "an HTML page, not JSON"),
]


@pytest.mark.parametrize(("fault", "code", "reason"), FAULTS, ids=[f[0].kind for f in FAULTS])
async def test_a_list_that_does_not_add_up_carries_the_last_jobs(
    start: Callable[..., Any],
    world: AlayaWorld,
    json_logs: io.StringIO,
    fault: AlayaFault,
    code: str,
    reason: str,
) -> None:
    rig = await start()
    good = await rig.next_full_poll()
    assert rig.value(good, "training_exporter_up", target=rig.target) == 1
    before_jobs, before_pods = jobs_of(good, INFO), pods_of(good)

    world.faults.append(fault)
    await rig.next_full_poll()
    series = await rig.next_full_poll()
    assert rig.value(series, "training_exporter_up", target=rig.target) == 0
    # Not listed: every job and pod of the last good poll is still served.
    assert jobs_of(series, INFO) == before_jobs and pods_of(series) == before_pods
    assert rig.count(ERRORS, series) >= 2
    assert requests(rig, series, code) >= 2
    # Neither a guard nor a gateway code nor the console page is worth a retry.
    retries = rig.value(series, "training_exporter_api_retries_total", endpoint="list")
    assert not retries
    [logged] = log_events(json_logs, NOT_READ)
    assert reason in logged["error"], logged

    world.faults.clear()
    series = await rig.next_full_poll()
    assert rig.value(series, "training_exporter_up", target=rig.target) == 1
    assert log_events(json_logs, "alaya job list read again")
    assert len(log_events(json_logs, NOT_READ)) == 1


async def test_access_keys_never_leak(
    start: Callable[..., Any], world: AlayaWorld, json_logs: io.StringIO
) -> None:
    # A wrong secret, and a gateway that quotes the rejected Authorization header back.
    world.echo_rejected_key = True
    secret = "sk-alaya-list-9c2e5b7d1f3a"
    rig = await start(secret_access_key=SecretStr(secret))
    series = await rig.next_full_poll()
    assert rig.value(series, "training_exporter_up", target=rig.target) == 0
    assert requests(rig, series, "401") >= 1
    exposition = await (await rig.client.get("/metrics")).text()
    landing = await rig.landing()
    logs = json_logs.getvalue()
    assert "signature mismatch" in logs
    for text in (logs, exposition, landing):
        assert DEMO_ACCESS_KEY_ID not in text and secret not in text
