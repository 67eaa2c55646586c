"""`training-job-exporter simulate` on its own, as a user would start it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request

from exporter.simulator.alaya import DEMO_API_KEY
from tests.conftest import REPO, cli_env
from tests.test_demo import free_port


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
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "exporter", "simulate", "--listen", f"127.0.0.1:{port}"],
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first.startswith(f"simulator listening on http://127.0.0.1:{port}"), first
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
