"""One job's failure is reported and the rest go on; a refused credential stops its target
and says where; the exit code says whether everything was written, and running the same
command again reads only what is missing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.simulator import running
from exporter.simulator.aihc_api import ServiceError
from exporter.simulator.alaya import DEMO_ACCESS_KEY_ID as ALAYA_ACCESS_KEY_ID
from exporter.simulator.alaya import DEMO_SECRET_ACCESS_KEY as ALAYA_SECRET_ACCESS_KEY
from tests.backfill.backfill_helpers import backfill, history, options, write_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


async def test_one_jobs_failure_and_a_refused_credential(tmp_path: Path) -> None:
    world = history(time.time())
    broken = world.aihc_finished.job_id

    def fail_one_job(action: str, body: dict[str, Any]) -> None:
        if action == "DescribeJobMetrics" and body.get("jobId") == broken:
            raise ServiceError("InternalError", "simulated", 500)

    async with running(world.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, world)
        args = options(config, world)

        world.aihc.before_action = fail_one_job
        run = await backfill(*args, cwd=tmp_path)
        assert run.code == 1, run.stderr
        failed = [line for line in run.stderr.splitlines() if broken in line]
        assert len(failed) == 1 and "HTTP 500" in failed[0], run.stderr
        assert "run the same command again" in run.stderr
        text = (tmp_path / "history.om").read_text()
        assert world.aihc_running.job_id in text and world.alaya_finished in text
        assert text.endswith("# EOF\n")

        def refuse(action: str, body: dict[str, Any]) -> None:
            if action == "DescribeJobMetrics":
                raise ServiceError("AccessDenied", "signature does not match", 403)

        world.aihc.before_action = refuse
        run = await backfill(*args, cwd=tmp_path)
        assert run.code == 1, run.stderr
        stopped = [line for line in run.stderr.splitlines() if "stopped at" in line]
        assert len(stopped) == 1, run.stderr
        assert f"job {broken}" in stopped[0] and "credentials refused" in stopped[0]
        assert "Traceback" not in run.stderr

        world.aihc.before_action = None
        marks = len(world.aihc.metric_requests)
        run = await backfill(*args, cwd=tmp_path)
        assert run.code == 0, run.stderr
        again = {b["jobId"] for b in world.aihc.metric_requests[marks:]}
        assert again == {broken}
        assert not (tmp_path / "history.om.state").exists()
    assert broken in (tmp_path / "history.om").read_text()


async def test_only_the_jobs_and_targets_asked_are_read(tmp_path: Path) -> None:
    world = history(time.time())
    wanted = world.aihc_running.job_id
    async with running(world.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, world)
        only = ["--target", "sim-aihc", "--job", wanted, "--since", "2h"]
        run = await backfill(*options(config, output="h.om"), *only, cwd=tmp_path)
    assert run.code == 0, run.stderr
    assert {b["jobId"] for b in world.aihc.metric_requests} == {wanted}
    assert world.simulator.log.count("gpu-metrics") == 0
    lines = (tmp_path / "h.om").read_text().splitlines()
    jobs = {line.split('job_id="')[1].split('"')[0] for line in lines if 'job_id="' in line}
    assert jobs == {wanted}


async def test_alaya_list_discovery_reads_finished_jobs_too(tmp_path: Path) -> None:
    world = history(time.time())
    async with running(world.simulator) as served:
        config = tmp_path / "exporter.yaml"
        write_config(config, served.url, world)
        settings = yaml.safe_load(config.read_text())
        settings["alaya"][0].update(
            discovery="list",
            access_key_id=ALAYA_ACCESS_KEY_ID,
            secret_access_key=ALAYA_SECRET_ACCESS_KEY,
            pod_pattern="worker-{index}",
            jobs=[],
        )
        config.write_text(yaml.safe_dump(settings))
        only = ["--target", "sim-alaya", "--since", "4h"]
        run = await backfill(*options(config, output="h.om"), *only, cwd=tmp_path)
    assert run.code == 0, run.stderr
    text = (tmp_path / "h.om").read_text()
    for job in (world.alaya_running, world.alaya_finished):
        assert any(
            line.startswith("training_job_info{") and f'job_id="{job}"' in line
            for line in text.splitlines()
        )
        assert (
            f'training_pod_gpu_utilization_ratio{{gpu="NVIDIA-H800A-NV-80G-0",job_id="{job}"'
            in text
        )
    # The finished job (SUCCEEDED, spelled Succeeded as live): from its end on, not before.
    finished = [
        line
        for line in text.splitlines()
        if line.startswith("training_job_status{")
        and f'job_id="{world.alaya_finished}"' in line
        and 'status="Succeeded"' in line
    ]
    assert finished and all(
        float(line.split()[-1]) >= int(world.alaya_finished_end) for line in finished
    )


async def test_a_429_storm_stops_the_target_and_the_next_run_goes_on(tmp_path: Path) -> None:
    world = history(time.time())
    world.aihc.add_job(status="Running", pods=1, created_at=world.now - 7200)
    faults = world.simulator.faults
    async with running(world.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, world, limits={"retries": 1})
        args = [*options(config, world), "--target", "sim-aihc"]
        faults.error_rates, faults.retry_after = {429: 1.0}, "1"
        faults.only = frozenset({"DescribeJobMetrics"})
        run = await backfill(*args, cwd=tmp_path)
        assert run.code == 1, run.stderr
        stopped = [line for line in run.stderr.splitlines() if "stopped at" in line]
        assert len(stopped) == 1 and "3 jobs in a row failed" in stopped[0], run.stderr
        assert "HTTP 429" in stopped[0] and "Traceback" not in run.stderr
        assert "run the same command again" in run.stderr

        faults.error_rates = {}
        before = world.simulator.log.count("DescribeJobs")
        run = await backfill(*args, cwd=tmp_path)
        assert run.code == 0, run.stderr
        # The jobs were listed once, by the first run.
        assert world.simulator.log.count("DescribeJobs") == before
