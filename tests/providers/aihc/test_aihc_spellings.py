"""Replies in the documentation's spelling and in Baidu's SDK's (`baiducloud-python-sdk-aihc`
0.0.4) export the same series, and the SDK's own models agree with what we read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baiducloud_python_sdk_aihc.models.describe_job_response import DescribeJobResponse
from baiducloud_python_sdk_aihc.models.describe_jobs_response import DescribeJobsResponse
from baiducloud_python_sdk_aihc.models.job_item import JobItem
from baiducloud_python_sdk_aihc.models.job_spec import JobSpec as SdkJobSpec
from baiducloud_python_sdk_aihc.models.pod import Pod as SdkPod

from exporter.providers.aihc import mapping, models
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld, Spelling
from exporter.simulator.aihc_replies import job_item, pods_at
from tests.providers.aihc.aihc_helpers import POOL, QUEUES, Harness
from tests.providers.aihc.test_aihc_exporter import ClientFactory, families, scrape

# What live replies carry beyond the SDK's models (docs/providers.md), and the documentation's
# secret-bearing `command`: the SDK drops them, nothing else.
BEYOND_THE_SDK = {
    "gpuUtilizationPercent",
    "gpuMemoryUtilizationPercent",
    "runTimeNanoseconds",
    "command",
}


def _series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every job and pod sample's name and labels."""
    return {
        (s.name, tuple(sorted(s.labels.items())))
        for family in families(text).values()
        for s in family
        if s.name.startswith(("training_job_", "training_pod_"))
    }


async def _scrape_in(spelling: Spelling, aiohttp_client: ClientFactory) -> tuple[AihcWorld, str]:
    """Five jobs over the three queues, listed in two pages."""
    world = AihcWorld.fixed(seed=3, pools={POOL: list(QUEUES)}, jobs=5)
    world.spelling = spelling
    async with running(Simulator(seed=3, aihc=world)) as served:
        harness = Harness(world, served.simulator, served.url)
        try:
            return world, await scrape(harness, aiohttp_client, page_size=3)
        finally:
            await harness.close()


async def test_sdk_spelling_exports_every_series_with_the_same_labels(
    aiohttp_client: ClientFactory,
) -> None:
    _, documented = await _scrape_in("docs", aiohttp_client)
    world, sdk = await _scrape_in("sdk", aiohttp_client)
    found = families(sdk)
    assert {s.labels["job_id"] for s in found["training_job_info"]} == set(world.jobs)
    pods = {p.name for j in world.jobs.values() for p in j.pods}
    assert {s.labels["pod"] for s in found["training_pod_info"]} == pods
    phases = found["training_pod_phase"]
    assert {s.labels["pod"] for s in phases if s.value == 1 and s.labels["phase"] == "Running"} == (
        pods
    )
    for name in ("training_pod_gpu_utilization_ratio", "training_pod_gpu_memory_utilization_ratio"):
        assert {s.labels["pod"] for s in found[name]} == pods, name
    assert {s.labels["queue"] for s in found["training_job_info"]} == set(QUEUES)
    assert {s.labels["image"] for s in found["training_job_info"]} != {""}
    assert len(found["training_job_replicas"]) == 5
    # DescribeJob as the SDK's DescribeJobResponse has it: the job nested under `job`.
    assert world.next_shape() == "nested"
    invalid = [
        s
        for s in found["training_exporter_dropped_values"]
        if s.name.endswith("_total") and s.labels["reason"] == "invalid_item"
    ]
    assert invalid == []
    assert _series(sdk) == _series(documented)


def test_the_simulator_s_sdk_replies_are_what_the_sdk_models() -> None:
    """Each key of the SDK-spelled item and pod survives the SDK's own from_dict/to_dict."""
    world = AihcWorld.fixed(seed=3, pools={POOL: ["default"]}, jobs=1)
    world.spelling = "sdk"
    job = next(iter(world.jobs.values()))
    now = world.now()
    item = job_item(world, job, now)
    item["pods"] = pods_at(world, job, now)
    kept = JobItem().from_dict(json.loads(json.dumps(item))).to_dict()
    assert set(item) - set(kept) == BEYOND_THE_SDK & set(item)
    assert {"jobid", "queue", "Job", "historyPods", "jobTimeLine"} <= set(kept)
    for pod, modelled in zip(item["pods"], kept["pods"], strict=True):
        assert modelled == pod
        assert "podPhase" not in pod and "creationAt" in pod


def _sdk_job(**extra: Any) -> JobItem:
    return JobItem(
        jobid="job-sdk0001",
        name="llama",
        status="Running",
        job_type="PyTorchJob",
        resource_pool_id="cce-sdk",
        queue="q-sdk",
        job=SdkJobSpec(image="registry/img:1", replicas=2),
        created_at="2026-08-01T00:00:00Z",
        finished_at="",
        priority="normal",
        user_id="u-1",
        **extra,
    )


def test_what_the_sdk_writes_reads_as_the_documentation_s_spelling_does() -> None:
    sdk = DescribeJobsResponse(total_count=1, jobs=[_sdk_job()]).to_dict()
    documented = {
        "totalCount": 1,
        "jobs": [
            {
                "jobId": "job-sdk0001",
                "name": "llama",
                "status": "Running",
                "jobType": "PyTorchJob",
                "resourcePoolId": "cce-sdk",
                "queueId": "q-sdk",
                "jobSpec": {"image": "registry/img:1", "replicas": 2},
                "createdAt": "2026-08-01T00:00:00Z",
                "finishedAt": "",
                "priority": "normal",
                "userId": "u-1",
            }
        ],
    }
    ours = models.parse_describe_jobs(json.dumps(sdk).encode())
    theirs = models.parse_describe_jobs(json.dumps(documented).encode())
    assert ours == theirs
    assert ours.jobs is not None and ours.jobs[0].job_id == "job-sdk0001"
    assert ours.jobs[0].queue_id == "q-sdk" and ours.jobs[0].job_spec.replicas == 2


@pytest.mark.parametrize("phase", ["Running", "Succeed", "Failed"])
def test_an_sdk_pod_s_status_is_its_phase(phase: str) -> None:
    pods = [SdkPod(name="w-0", status=phase, replica_type="worker", restart_count=1)]
    reply = DescribeJobResponse(job=_sdk_job(pods=pods)).to_dict()
    detail = models.parse_describe_job(json.dumps(reply).encode())
    assert detail.job_id == "job-sdk0001" and detail.pods is not None
    assert [mapping.pod_phase(p) for p in detail.pods] == [phase]
