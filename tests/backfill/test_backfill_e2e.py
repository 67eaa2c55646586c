"""End to end over HTTP with the real tools: the simulator's history (a running and a finished
job on each provider) -> `backfill` (`file_path`, tests/backfill/conftest.py, exit 0) ->
`promtool tsdb create-blocks-from openmetrics` -> a real Prometheus on those blocks, whose
`query_range` must give exactly the simulator's points, value by value at their timestamps;
and what the backfill asked the simulator for its finished AIHC job."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.backfill.backfill_helpers import (
    POOL,
    STEP,
    FilePath,
    aihc_points,
    alaya_points,
)
from tests.backfill.real_stores import promtool_blocks, start_prometheus

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def query_range(url: str, expr: str, start: int, end: int) -> list[dict[str, Any]]:
    params = {"query": expr, "start": str(start), "end": str(end), "step": str(STEP)}
    with urllib.request.urlopen(f"{url}/api/v1/query_range?{urllib.parse.urlencode(params)}") as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def only_series(url: str, expr: str, points: list[tuple[int, float]]) -> None:
    """`expr` over the points' span is one series whose samples are exactly `points`."""
    assert points, expr
    result = query_range(url, expr, points[0][0], points[-1][0])
    assert len(result) == 1, (expr, [r["metric"] for r in result])
    got = [(int(t), float(v)) for t, v in result[0]["values"]]
    assert got == points, expr


def test_backfilled_history_is_what_prometheus_answers(file_path: FilePath, tmp_path: Path) -> None:
    world = file_path.world
    text = file_path.output.read_text()
    assert text.endswith("# EOF\n")
    assert not file_path.output.with_name("history.om.state").exists()
    (tmp_path / "history.om").write_text(text)
    promtool_blocks(tmp_path, "history.om")
    prometheus = start_prometheus(tmp_path)
    url = prometheus.root
    try:
        for job in (world.aihc_running, world.aihc_finished):
            pod = job.pods[1].name
            only_series(
                url,
                f'training_pod_gpu_utilization_ratio{{provider="aihc",pod="{pod}"}}',
                aihc_points(world, job, pod, "GpuUsage"),
            )
        for job in (world.alaya_running, world.alaya_finished):
            only_series(
                url,
                f'training_pod_gpu_utilization_ratio{{provider="alaya",job_id="{job}",'
                f'pod="worker-1",gpu="NVIDIA-H800A-NV-80G-1"}}',
                alaya_points(world, job, "worker-1", "gpu", 1),
            )
        finished = world.aihc_finished
        first = -(-int(max(world.since, finished.created_at)) // STEP) * STEP
        info = [(t, 1.0) for t in range(first, world.until + 1, STEP)]
        only_series(
            url,
            f'training_job_info{{resource_pool="{POOL}",job_id="{finished.job_id}"}}',
            info,
        )
        # Its status holds from its end: Succeeded 1, the others 0, never before.
        ended = -(-int(world.now - 3600) // STEP) * STEP
        status = f'training_job_status{{job_id="{finished.job_id}",status="Succeeded"}}'
        only_series(url, status, [(t, 1.0) for t in range(ended, world.until + 1, STEP)])
        assert not query_range(url, status, first, ended - STEP)
    finally:
        prometheus.stop()


def test_a_finished_aihc_jobs_metrics_are_asked_to_one_step_past_its_end(
    file_path: FilePath,
) -> None:
    # The simulator serves no point past a job's end, so the file cannot tell: its log can.
    world = file_path.world
    ended = world.now - 3600
    ends = [
        int(body["endTime"])
        for body in world.aihc.metric_requests
        if body["jobId"] == world.aihc_finished.job_id
    ]
    assert ends and world.until > ended + STEP
    assert ended < max(ends) <= ended + STEP, (ended, ends)
