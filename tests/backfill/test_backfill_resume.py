"""An interrupted backfill (Ctrl-C, then a kill -9) resumes without asking again for a window
it wrote, and its file is byte for byte an uninterrupted run's, which promtool makes blocks of
(and promtool makes the same blocks of the same bytes, so it runs on the resumed file alone)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from exporter.simulator import running
from tests.backfill.backfill_helpers import (
    History,
    backfill,
    history,
    interrupt,
    options,
    write_config,
)
from tests.backfill.real_stores import promtool_blocks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

Window = tuple[str, str, str, int]


def requested(world: History, since_request: int, since_body: int) -> set[Window]:
    """(job, pod, type, start) of every metric call the simulator served after the marks."""
    out: set[Window] = set()
    for body in world.aihc.metric_requests[since_body:]:
        out.add((body["jobId"], "", body["metricType"], int(body["startTime"])))
    for entry in list(world.simulator.log.entries)[since_request:]:
        if entry.endpoint == "gpu-metrics":
            job, pod = entry.subject[0].split("/", 1)
            start = world.alaya.parse_time(entry.query["startTime"])
            out.add((job, pod, entry.subject[1], start))
    return out


def written(state: Path) -> set[Window]:
    """The windows the state beside the output records as written."""
    run = json.loads((state / "run.json").read_text())
    out: set[Window] = set()
    for listed in run["targets"].values():
        for index, (job_id, _) in enumerate(listed["jobs"]):
            journal = state / listed["dir"] / f"j{index}" / "journal"
            if not journal.exists():
                continue
            for line in journal.read_text().splitlines():
                key = json.loads(line)["key"]
                if key == "describe":
                    continue
                if key.startswith("["):
                    pod, metric_type, start = json.loads(key)
                    out.add((job_id, pod, metric_type, int(start)))
                else:
                    metric_type, start = key.split("@")
                    out.add((job_id, "", metric_type, int(start)))
    return out


async def test_interrupted_twice_then_resumed_reads_no_window_twice(tmp_path: Path) -> None:
    # 8 hours: 36 metric calls, 4 per Alaya pod and type.
    world = history(time.time(), hours=8)
    async with running(world.simulator) as served:
        config = write_config(tmp_path / "exporter.yaml", served.url, world)
        args = options(config, world)
        state = tmp_path / "history.om.state"

        code, stderr = await interrupt(world, args, tmp_path, signal.SIGINT, 10)
        assert code == 130, stderr
        assert "interrupted" in stderr and "run the same command again" in stderr
        assert "Traceback" not in stderr
        first = written(state)
        assert first

        marks = len(world.simulator.log.entries), len(world.aihc.metric_requests)
        code, stderr = await interrupt(world, args, tmp_path, signal.SIGKILL, 10)
        assert code == -signal.SIGKILL
        assert not requested(world, *marks) & first
        second = written(state)
        assert second > first

        marks = len(world.simulator.log.entries), len(world.aihc.metric_requests)
        resumed = await backfill(*args, cwd=tmp_path)
        assert resumed.code == 0, resumed.stderr
        assert "resuming" in resumed.stderr
        last = requested(world, *marks)
        assert last and not last & second
        assert not state.exists()

        whole = await backfill(*options(config, world, "whole.om"), cwd=tmp_path)
        assert whole.code == 0, whole.stderr
    assert (tmp_path / "history.om").read_bytes() == (tmp_path / "whole.om").read_bytes()
    promtool_blocks(tmp_path, "history.om")
