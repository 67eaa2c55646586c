"""Soak: 450 AIHC jobs churn through the simulator while the real exporter polls it.

The exporter runs as its own process (the CLI, polling back to back), so the RSS read from
/proc/PID/status is the exporter's alone: not the simulator's, not pytest's, not what other
tests left behind in this process. The simulator runs here and the test scripts the churn:
each step creates jobs (Pending), starts the previous step's, finishes the oldest running
ones and removes the previous step's finished ones. After each step the test waits until a
scrape holds exactly the live set: every listed job with the series of its status, every
running job's pods with theirs, every finished job's last pods (its final read), and nothing
of a removed job (`stale_after` is long, so a job wrongly carried over would show).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter.providers.aihc.target import METRIC_BY_TYPE
from exporter.simulator import RequestLog, Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from tests.conftest import bound_url, start_exporter

POOL = "cce-soak0001"
QUEUES = ["q-alpha", "q-beta"]
METRIC_TYPES = ["GpuUsage", "MemoryUsage"]
PODS = 2
RUNNING = 50
# Each step creates, starts, finishes and removes 50 jobs: 150 listed.
BATCH = 50
# 50 + 8 x 50 = 450 jobs through the simulator.
STEPS = 8
# From step 2 on, the live set is steady: 50 pending, 50 running, 50 finished.
STEADY = 2
# How long a step may take to show: generous, for a loaded machine; a job wrongly kept or
# dropped never shows the live set (stale_after is 1 h).
LIVE_WITHIN = 60
MAX_RSS_GROWTH = 0.10


@dataclass
class Churn:
    """The scripted life of the jobs: who is pending, running and finished right now."""

    world: AihcWorld
    pending: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    created: int = 0

    def create(self, count: int, status: str) -> list[str]:
        ids = []
        for i in range(count):
            queue = QUEUES[(self.created + i) % len(QUEUES)]
            # Every job carries the job-wide figures: one shape per status.
            job = self.world.add_job(queue=queue, status=status, pods=PODS, stats=True)
            ids.append(job.job_id)
        self.created += count
        return ids

    def step(self, number: int) -> None:
        for job_id in self.finished:
            self.world.remove_job(job_id)
        self.finished = self.running[:BATCH]
        for i, job_id in enumerate(self.finished):
            self.world.set_status(job_id, "Failed" if (number + i) % 4 == 0 else "Succeeded")
        self.running = self.running[BATCH:]
        for job_id in self.pending:
            self.world.set_status(job_id, "Running")
        self.running += self.pending
        self.pending = self.create(BATCH, "Pending")

    def status_of(self, job_id: str) -> str:
        if job_id in self.running:
            return "running"
        if job_id in self.pending:
            return "pending"
        # A failed job's shape adds its failure class to a succeeded one's.
        return "failed" if self.world.jobs[job_id].status == "Failed" else "finished"

    @property
    def listed(self) -> set[str]:
        return {*self.pending, *self.running, *self.finished}


@dataclass(frozen=True)
class Scrape:
    # job id -> how many samples of each name carry it
    shapes: dict[str, Counter[str]]
    # job id -> the pods its samples name
    pods: dict[str, set[str]]
    polls: float
    up: float
    series_gauge: float
    job_samples: int


def parse(text: str) -> Scrape:
    shapes: dict[str, Counter[str]] = {}
    pods: dict[str, set[str]] = {}
    polls = up = gauge = 0.0
    count = 0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            job_id = s.labels.get("job_id")
            if job_id is not None:
                count += 1
                shapes.setdefault(job_id, Counter())[s.name] += 1
                if "pod" in s.labels:
                    pods.setdefault(job_id, set()).add(s.labels["pod"])
            elif s.name == "training_exporter_poll_duration_seconds_count":
                polls = s.value
            elif s.name == "training_exporter_up" and s.labels["provider"] == "aihc":
                up = s.value
            elif s.name == "training_exporter_series" and s.labels["provider"] == "aihc":
                gauge = s.value
    return Scrape(shapes, pods, polls, up, gauge, count)


@dataclass
class Exporter:
    process: subprocess.Popen[bytes]
    url: str
    session: aiohttp.ClientSession

    async def scrape(self) -> Scrape:
        async with self.session.get(f"{self.url}/metrics") as response:
            assert response.status == 200
            text = await response.text()
        return parse(text)

    async def live_set(self, churn: Churn, shapes: dict[str, Counter[str]]) -> Scrape:
        """The first scrape that holds exactly the live set (see check_live_set)."""
        deadline = time.monotonic() + LIVE_WITHIN
        while True:
            scrape = await self.scrape()
            found = dict(shapes)
            try:
                check_live_set(churn, scrape, found)
            except AssertionError:
                assert time.monotonic() < deadline, (
                    f"no scrape held the live set in {LIVE_WITHIN} s"
                )
                assert self.process.poll() is None, "the exporter exited"
                # Each scrape is parsed here, beside the simulator: not too often.
                await asyncio.sleep(0.25)
                continue
            shapes.update(found)
            return scrape

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


def config(url: str) -> dict[str, object]:
    return {
        "poll_interval": "1s",
        # Long: a job wrongly carried over after it left would stay in sight, not expire.
        "stale_after": "1h",
        "web": {"listen_address": "127.0.0.1:0"},
        "aihc": [
            {
                "name": "soak",
                "endpoint": url,
                "access_key_id": DEMO_ACCESS_KEY_ID,
                "secret_access_key": DEMO_SECRET_ACCESS_KEY,
                "resource_pool_id": POOL,
                "queues": QUEUES,
                "metric_types": METRIC_TYPES,
                "events": False,
                "limits": {"max_concurrency": 64, "requests_per_second": "unlimited"},
            }
        ],
    }


@pytest.fixture
async def soak(tmp_path: Path) -> AsyncIterator[tuple[Churn, Exporter]]:
    world = AihcWorld.fixed(seed=11, pools={POOL: QUEUES})
    churn = Churn(world)
    churn.running = churn.create(RUNNING, "Running")
    # Bounded request records: the simulator shares this process, not the exporter's.
    simulator = Simulator(seed=11, aihc=world, log=RequestLog(keep=1000))
    async with running(simulator) as served:
        path = tmp_path / "exporter.yaml"
        path.write_text(yaml.safe_dump(config(served.url)))
        log = tmp_path / "exporter.log"
        process = start_exporter(path, log)
        try:
            url = None
            for _ in range(200):
                url = bound_url(log)
                if url or process.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            assert url, log.read_text()
            async with aiohttp.ClientSession() as session:
                yield churn, Exporter(process, url, session)
        finally:
            process.terminate()
            # Polls run back to back while the test waits here; let the loop serve them.
            for _ in range(200):
                if process.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            if process.poll() is None:
                process.kill()
            process.wait(10)
    assert process.returncode == 0, log.read_text()[-3000:]


def check_live_set(churn: Churn, scrape: Scrape, shapes: dict[str, Counter[str]]) -> None:
    assert scrape.up == 1.0
    assert set(scrape.shapes) == churn.listed
    for job_id, shape in scrape.shapes.items():
        status = churn.status_of(job_id)
        # A failed job's class comes with the list after its final read: then it is live.
        assert status != "failed" or shape["training_job_failure_class"] == 1, job_id
        # The first job seen in each status sets the shape every later one must have.
        assert shape == shapes.setdefault(status, shape), (job_id, status)
        # Finished jobs were running: their final read keeps their last pods.
        expected_pods = (
            {p.name for p in churn.world.jobs[job_id].pods} if status != "pending" else set()
        )
        assert scrape.pods.get(job_id, set()) == expected_pods, (job_id, status)
    assert scrape.series_gauge == scrape.job_samples


@pytest.mark.slow
@pytest.mark.timeout(120)
async def test_churn_of_450_jobs_exports_the_live_set_and_rss_stays_flat(
    soak: tuple[Churn, Exporter],
) -> None:
    churn, exporter = soak
    shapes: dict[str, Counter[str]] = {}
    rss: list[int] = []
    scrape = await exporter.live_set(churn, shapes)
    rss.append(exporter.rss_kib())
    for number in range(STEPS):
        churn.step(number)
        churn.world.metric_requests.clear()
        scrape = await exporter.live_set(churn, shapes)
        rss.append(exporter.rss_kib())
    assert churn.created == 450
    running = shapes["running"]
    for metric_type in METRIC_TYPES:
        assert running[METRIC_BY_TYPE[metric_type]] == PODS
    assert running["training_pod_info"] == PODS
    assert {"pending", "running", "finished"} <= set(shapes)
    # RSS after the first steady step, to the end: the heap has grown to the live set's size.
    growth = rss[-1] / rss[STEADY + 1] - 1
    print(f"{scrape.polls:.0f} polls; exporter RSS KiB per step {rss}: {growth:+.1%}")
    assert growth < MAX_RSS_GROWTH, rss
