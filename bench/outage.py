"""A listing outage over HTTP: DescribeJobs answers 500 for two rounds (issue 19).

30 AIHC jobs x 2 pods, `poll_interval: 4s` (medium 20 s, slow 60 s), 20 requests/s, the
simulator and the exporter's app in this process, which imports the exporter from PYTHONPATH
(so an older checkout is measured alike: `PYTHONPATH=/old/checkout python bench/outage.py`).
After warm-up and two fast intervals, DescribeJobs fails for two rounds. Printed:

- gpu: jobs whose GPU utilisation was read during the outage, of 30 (goal: all);
- up: samples of `training_exporter_up` taken during the outage that said 0 (goal: all);
- rescratch: slow-tier reads in the first two rounds after the outage, over what the slow
  tier's cadence gives in that time (30 x 8 s / 60 s = 4): about 1 when nothing was read
  again from scratch, 7.5 when every job was.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Settings
from exporter.server import STATE, build_app
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from tests.target_helpers import TEST_POOL, aihc_target

JOBS = 30
POLL = 4.0
SLOW = 60.0
TYPES = ["GpuUsage", "CpuUsage", "GpuTemperature"]


async def up(client: TestClient) -> float:  # type: ignore[type-arg]
    text = await (await client.get("/metrics")).text()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "training_exporter_up":
                return s.value
    return -1.0


async def main() -> int:
    world = AihcWorld.fixed(seed=9, pools={TEST_POOL: ["q"]}, jobs=JOBS, pods_per_job=2)
    simulator = Simulator(seed=9, aihc=world)
    async with running(simulator) as served:
        target = aihc_target(
            served.url,
            metric_types=TYPES,
            events=False,
            tiers={"medium": "20s", "slow": f"{SLOW:g}s"},
            limits={"requests_per_second": 20, "max_concurrency": 8},
        )
        app = build_app(Settings.model_validate({"poll_interval": POLL, "aihc": [target]}))
        async with TestClient(TestServer(app)) as client:
            scheduler = app[STATE].scheduler
            assert scheduler is not None and await scheduler.wait_ready(120)
            await asyncio.sleep(2 * POLL)
            simulator.faults.only = frozenset({"DescribeJobs"})
            simulator.faults.error_rates = {500: 1.0}
            began = time.monotonic()
            samples = []
            while time.monotonic() < began + 2 * POLL:
                samples.append(await up(client))
                await asyncio.sleep(0.5)
            simulator.faults.error_rates = {}
            ended = time.monotonic()
            await asyncio.sleep(2 * POLL)
            log = list(simulator.log.entries)
    gpu = {e.subject[0] for e in log if began <= e.at < ended and e.subject[1] == "GpuUsage"}
    slow = [e for e in log if ended <= e.at < ended + 2 * POLL and e.subject[1] == "GpuTemperature"]
    cadence = JOBS * 2 * POLL / SLOW
    print(f"gpu       jobs_read_during_outage={len(gpu)}/{JOBS} goal={JOBS}")
    print(f"up        zero_samples={samples.count(0.0)}/{len(samples)}")
    ratio = len(slow) / cadence
    print(f"rescratch slow_reads_after={len(slow)} cadence={cadence:.0f} ratio={ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
