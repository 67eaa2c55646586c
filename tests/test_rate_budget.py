"""The request budget: requests_per_second holds as the provider sees it, and costs no more."""

from __future__ import annotations

import time

from exporter.config import Limits
from exporter.providers.aihc import AihcProvider
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.work.oneshot import read_all
from tests.target_helpers import aihc_target

TYPES = [
    "GpuUsage", "GpuMemoryUsage", "CpuUsage", "MemoryUsage", "CpuTime", "MemoryAllocation",
    "DiskReadRate", "DiskWriteRate", "RDMASendDataRate", "RDMARecvDataRate", "PCIESendDataRate",
    "PCIERecvDataRate", "NVLinkSendDataRate", "NVLinkRecvDataRate", "GpuTemperature",
    "GpuPowerUsage", "GpuPipeTensorUsage", "RDMAHealth", "RDMASendErrorRate", "RDMARecvErrorRate",
]  # fmt: skip


async def test_twenty_per_second_over_two_hundred_calls() -> None:
    # 2 list pages + 9 jobs x (1 detail + 20 metric types + 1 events) = 200 calls.
    simulator = Simulator(seed=5, aihc=AihcWorld.fixed(jobs=9, pods_per_job=2))
    async with running(simulator) as served:
        target = aihc_target(
            served.url,
            metric_types=TYPES,
            page_size=5,
            limits=Limits(requests_per_second=20, max_concurrency=16, retries=0, timeout=10),
        )
        provider = AihcProvider(target, SelfMetrics())
        started = time.monotonic()
        try:
            context = PollContext(deadline=started + 60, started_at=time.time())
            result = await read_all(provider, context, workers=16)
        finally:
            await provider.close()
        took = time.monotonic() - started
    assert result.ok
    assert simulator.log.count() == 200
    busiest = simulator.log.max_in_window(1.0)
    assert busiest <= 21, f"{busiest} requests within one second"
    assert took <= 1.15 * 10, f"the poll took {took:.2f} s"
