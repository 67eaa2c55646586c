"""`training-job-exporter simulate` on its own, as a user would start it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

from bench.oneshot import read_all
from exporter.providers.aihc import AihcProvider
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.aihc import DEMO_RESOURCE_POOL
from exporter.simulator.alaya import DEMO_API_KEY
from exporter.targets import tier_plan
from tests.conftest import REPO, cli_env
from tests.target_helpers import aihc_target


def get(url: str, headers: dict[str, str], method: str = "GET") -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, headers=headers, method=method, data=b"{}" if method == "POST" else None
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_simulate_serves_both_providers_and_checks_credentials() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "simulate", "--listen", "127.0.0.1:0"],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith("simulator listening on http://127.0.0.1:"), first
        port = int(first.split()[-1].rsplit(":", 1)[1])
        jobs_line = "".join(process.stdout.readline() for _ in range(2))
        job_id = jobs_line.split("jobs ['")[1].split("'")[0]
        base = f"http://127.0.0.1:{port}"
        url = f"{base}/v1/training/instance/{job_id}/worker-0/gpu-metrics?type=gpu&period=15m"
        status, body = get(url, {"Authorization": f"Bearer {DEMO_API_KEY}"})
        reply = json.loads(body)
        assert status == 200 and reply["status"] == 200
        assert reply["data"]["metricData"][0]["gpuName"]
        status, body = get(url, {"Authorization": "Bearer wrong-key"})
        assert 403 in (status, json.loads(body).get("status"))
        # An unsigned AIHC call is refused the way BCE refuses it.
        status, body = get(f"{base}/?action=DescribeJobs&resourcePoolId=cce-demo0001", {}, "POST")
        assert status in (401, 403), body
        assert json.loads(body)["code"]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)
        if process.stdout:
            process.stdout.close()
    assert process.returncode == 0


async def test_a_fixed_aihc_world_is_served_and_its_requests_counted_at_exit() -> None:
    command = ["simulate", "--listen", "127.0.0.1:0", "--aihc-jobs", "7", "--aihc-pods", "3"]
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", *command],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split("listening on ", 1)[1].strip()
        target = aihc_target(
            url,
            resource_pool_id=DEMO_RESOURCE_POOL,
            metric_types=["GpuUsage"],
            events=False,
            limits={"requests_per_second": 0},
        )
        provider = AihcProvider(target, SelfMetrics(), tier_plan(target, 60.0))
        try:
            context = PollContext(time.monotonic() + 30, time.time(), lambda job_id: True)
            result = await read_all(provider, context)
        finally:
            await provider.close()
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=10)
    assert result.ok and len(result.jobs) == 7
    pods = {
        s.label_values[4]
        for parts in result.jobs.values()
        for s in parts["pods"].samples  # type: ignore[union-attr]
        if s.name == "training_pod_info"
    }
    assert len(pods) == 7 * 3
    # One page, then DescribeJob and one DescribeJobMetrics per job.
    assert f"simulator served {1 + 7 * 2} requests" in out
