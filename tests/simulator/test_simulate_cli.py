"""`exporter simulate --aihc-jobs N`: a fixed AIHC world in its own process, for benchmarks."""

from __future__ import annotations

import subprocess
import sys
import time

from pydantic import SecretStr

from exporter.config import AihcTarget
from exporter.providers.aihc import AihcProvider
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from tests.conftest import REPO, cli_env


async def test_fixed_world_is_served_and_its_requests_counted_at_exit() -> None:
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
        target = AihcTarget(
            name="sim",
            endpoint=url,
            access_key_id=SecretStr(DEMO_ACCESS_KEY_ID),
            secret_access_key=SecretStr(DEMO_SECRET_ACCESS_KEY),
            resource_pool_id=DEMO_RESOURCE_POOL,
            metric_types=["GpuUsage"],
            events=False,
            limits={"requests_per_second": 0},
        )
        provider = AihcProvider(target, SelfMetrics())
        try:
            context = PollContext(time.monotonic() + 30, time.time(), lambda job_id: True)
            result = await provider.poll(context)
        finally:
            await provider.close()
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=10)
    assert result.ok and len(result.jobs) == 7
    pods = {
        s.label_values[4]
        for parts in result.jobs.values()
        for s in parts["pods"]  # type: ignore[union-attr]
        if s.name == "training_pod_info"
    }
    assert len(pods) == 7 * 3
    # One page, then DescribeJob and one DescribeJobMetrics per job.
    assert f"simulator served {1 + 7 * 2} requests" in out
