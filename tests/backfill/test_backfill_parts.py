"""The backfill's parts on their own: windows, the resume state on disk after a kill, the
OpenMetrics writer's order, and progress off and on a terminal (on a simulated clock)."""

from __future__ import annotations

import io
from pathlib import Path

from exporter.backfill.progress import PLAIN_EVERY, Progress
from exporter.backfill.state import JobState
from exporter.backfill.writer import write_openmetrics
from exporter.model import POD_LABELS
from exporter.providers.kit.history import Series
from exporter.providers.kit.windows import grid, windows

LABELS = ("aihc", "pool", "q", "job-1", "pod-0")


def test_windows_cover_the_span_once_from_its_start() -> None:
    assert windows(100, 399, 100) == [(100, 199), (200, 299), (300, 399)]
    assert windows(100.5, 250, 100) == [(101, 200), (201, 250)]
    assert windows(5, 4, 100) == []
    spans = windows(1_000, 1_000 + 86_399, 60_000)
    assert len(spans) == 2 and spans[-1][1] == 87_399
    assert grid(61, 240) == [120, 180, 240]


def test_a_kill_mid_task_is_cut_back_to_the_last_whole_task(tmp_path: Path) -> None:
    job = JobState(tmp_path / "j0")
    job.commit("describe", [], {"start": 0, "end": 100})
    job.commit("GpuUsage@0", [Series("gpu", POD_LABELS, LABELS, [(60.0, 0.5)])])
    # A kill while the next task wrote: its family line is there, its journal line half.
    with (job.path / "gpu.jsonl").open("a") as family:
        family.write('[["provider"], ["aihc"], [[120, 0.7]]]\n')
    with (job.path / "journal").open("a") as journal:
        journal.write('{"key": "GpuUsage@100", "poi')
    again = JobState(tmp_path / "j0")
    assert set(again.done) == {"describe", "GpuUsage@0"}
    assert again.facts == {"start": 0, "end": 100}
    assert [points for _, _, points in again.read("gpu")] == [[[60.0, 0.5]]]
    again.commit("GpuUsage@100", [Series("gpu", POD_LABELS, LABELS, [(120.0, 0.75)])])
    assert set(JobState(tmp_path / "j0").done) == {"describe", "GpuUsage@0", "GpuUsage@100"}


def test_each_series_is_written_once_in_time_order_families_whole(tmp_path: Path) -> None:
    a = JobState(tmp_path / "j0")
    a.commit(
        "w2",
        [
            Series(
                "training_pod_gpu_utilization_ratio",
                POD_LABELS,
                LABELS,
                [(180.0, 0.3), (240.0, 0.4)],
            )
        ],
    )
    a.commit(
        "w1",
        [
            Series(
                "training_pod_gpu_utilization_ratio",
                POD_LABELS,
                LABELS,
                [(60.0, 0.1), (180.0, 0.9)],
            )
        ],
    )
    a.commit("info", [Series("training_pod_info", POD_LABELS, LABELS, [(60.0, 1.0)])])
    b = JobState(tmp_path / "j1")
    # Another job holding the same series (two targets on one pool): the first job's is kept.
    b.commit(
        "w1", [Series("training_pod_gpu_utilization_ratio", POD_LABELS, LABELS, [(30.0, 0.2)])]
    )
    out = tmp_path / "h.om"
    assert write_openmetrics(out, [a, b]) == 4
    lines = out.read_text().splitlines()
    series = 'job_id="job-1",pod="pod-0",provider="aihc",queue="q",resource_pool="pool"'
    assert lines == [
        "# HELP training_pod_gpu_utilization_ratio Latest sample of the pod's GPU utilisation,"
        " 0-1.",
        "# TYPE training_pod_gpu_utilization_ratio gauge",
        f"training_pod_gpu_utilization_ratio{{{series}}} 0.1 60",
        f"training_pod_gpu_utilization_ratio{{{series}}} 0.3 180",
        f"training_pod_gpu_utilization_ratio{{{series}}} 0.4 240",
        "# HELP training_pod_info Descriptive labels of a pod; always 1.",
        "# TYPE training_pod_info gauge",
        f"training_pod_info{{{series}}} 1.0 60",
        "# EOF",
    ]


def test_off_a_terminal_one_line_every_few_seconds() -> None:
    now = [0.0]
    stream = io.StringIO()
    progress = Progress(stream, terminal=False, clock=lambda: now[0])
    progress.add_jobs(2)
    progress.add_windows(10)
    for second in range(1, 11):
        now[0] = float(second)
        progress.window_done(100, second)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 10 // int(PLAIN_EVERY)
    assert lines[0] == "backfill: jobs 0/2, windows 5/10, calls 5, points 500, time left 5s"
    progress.close()
    assert stream.getvalue().splitlines()[-1].startswith("backfill: jobs 0/2, windows 10/10")


def test_on_a_terminal_a_bar_with_jobs_calls_points_and_time_left() -> None:
    stream = io.StringIO()
    progress = Progress(stream, terminal=True)
    progress.add_jobs(1)
    progress.add_windows(4)
    progress.window_done(10, 1)
    progress.job_done(3)
    progress.close()
    text = stream.getvalue()
    assert "1/4" in text and "jobs 1/1" in text and "calls 3" in text and "points 10" in text
    assert "<" in text  # tqdm's time left: [elapsed<left]
