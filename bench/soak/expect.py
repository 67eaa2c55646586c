"""What the exporter should export at any moment: the simulator's worlds are pure functions of
time, so the soak builds the same worlds here and asks them, instead of asking the simulator.

- AIHC (`soak-aihc`): every job DescribeJobs lists in the soak's pool; pods of its Running
  jobs (a job that finished keeps the pods of its final read, so any pod of a listed job is
  allowed).
- Alaya list discovery (`soak-alaya-list`): the RUNNING jobs of data centre 1, with
  `worker-0`... as `pod_pattern` names them.
- Alaya jobs file (`soak-alaya-file`): the jobs the soak wrote into the file, as of then.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping

from exporter.simulator.aihc import DEMO_RESOURCE_POOL, AihcWorld
from exporter.simulator.lively import LivelyAlaya

Pods = dict[str, frozenset[str]]
FILE_AIDC, LIST_AIDC = 2, 1


class Expected:
    def __init__(self, seed: int) -> None:
        self.aihc = AihcWorld(seed=seed)
        self.alaya = LivelyAlaya(seed, clock=lambda: 0.0)
        # (sim time written, job id -> pods) of each jobs file the soak wrote.
        self.files: list[tuple[float, Pods]] = []

    def aihc_jobs(self, at: float) -> Pods:
        """Job id -> pods of every job listed at `at`."""
        return {
            j.job_id: frozenset(p.name for p in j.pods)
            for j in self.aihc.jobs_in(DEMO_RESOURCE_POOL, at)
        }

    def aihc_running(self, at: float) -> Pods:
        return {
            j.job_id: frozenset(p.name for p in j.pods)
            for j in self.aihc.jobs_in(DEMO_RESOURCE_POOL, at)
            if j.status_at(at) == "Running"
        }

    def alaya_running(self, at: float, aidc: int) -> Pods:
        return {
            job.id: frozenset(pods)
            for job, pods in self.alaya.window(at)
            if job.status(at) == "RUNNING" and job.aidc_id == aidc
        }

    def file_jobs(self, at: float) -> Pods:
        """The jobs file's jobs as of `at`."""
        i = bisect_right([t for t, _ in self.files], at)
        return self.files[i - 1][1] if i else {}

    def wrote(self, at: float, jobs: Mapping[str, frozenset[str]]) -> None:
        self.files.append((at, dict(jobs)))
