"""One job's failure is reported and the rest go on; a refused credential stops its target
and says where; the exit code says whether everything was written, and running the same
command again reads only what is missing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from exporter.simulator import running
from exporter.simulator.aihc import ServiceError
from tests.backfill.backfill_helpers import backfill, history, write_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


async def test_one_jobs_failure_and_a_refused_credential(tmp_path: Path) -> None:
    world = history(time.time())
    broken = world.aihc_finished.job_id

    def fail_one_job(action: str, body: dict[str, Any]) -> None:
        if action == "DescribeJobMetrics" and body.get("jobId") == broken:
            raise ServiceError("InternalError", "simulated", 500)

    async with running(world.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, world)
        args = ["--config", str(config), "--since", str(world.since), "--until"]
        args += [str(world.until), "--requests-per-second", "50", "--output", "history.om"]

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
        run = await backfill(
            "--config",
            str(config),
            "--target",
            "sim-aihc",
            "--job",
            wanted,
            "--since",
            "2h",
            "--requests-per-second",
            "50",
            "--output",
            "h.om",
            cwd=tmp_path,
        )
    assert run.code == 0, run.stderr
    assert {b["jobId"] for b in world.aihc.metric_requests} == {wanted}
    assert world.simulator.log.count("gpu-metrics") == 0
    lines = (tmp_path / "h.om").read_text().splitlines()
    jobs = {line.split('job_id="')[1].split('"')[0] for line in lines if 'job_id="' in line}
    assert jobs == {wanted}
