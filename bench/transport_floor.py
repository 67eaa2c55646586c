"""The transport's floor: what a bare aiohttp client spends per request at the exporter's pace.

`bench.polling` runs this in its own process after the exporter's busy phase, against the same
simulator, at the rate the exporter kept and with its 8 connections: DescribeJobMetrics calls
of the listed jobs, every metric type in turn, windows of two steps as in steady state. The
requests are signed before the measured phase (the exporter's signer, so the simulator takes
them), then sent through one `aiohttp.ClientSession` paced by `aiolimiter`, and each body is
read whole and thrown away: no parse, no merge, no render, no scrape.

On these machines, waking an idle event loop costs about 0.2 ms of CPU, and a paced request
wakes it a few times (the pacer, the reply), so this floor is far from zero. It is issue 38's
yardstick, a client anyone would write; the exporter's own transport
(`exporter.transport.connection`) costs less than half of it, so the exporter's request path
alone can come in under it.

    python -m bench.transport_floor URL --rate 48 --seconds 40
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

import aiohttp
from aiolimiter import AsyncLimiter
from pydantic import SecretStr

from bench.measure import blocks
from exporter.providers.aihc.client import DESCRIBE_JOB_METRICS, AihcClient
from exporter.providers.aihc.target import AihcTarget
from exporter.providers.kit.wire import json_wire
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.transport.iface import PreparedRequest

CONNECTIONS = 8
STEP = 5


def demo_target(url: str, name: str, **settings: Any) -> AihcTarget:
    """An AIHC target of the simulator's demo pool and keys at `url`."""
    return AihcTarget(
        name=name,
        endpoint=url,
        resource_pool_id=DEMO_RESOURCE_POOL,
        access_key_id=SecretStr(DEMO_ACCESS_KEY_ID),
        secret_access_key=SecretStr(DEMO_SECRET_ACCESS_KEY),
        **settings,
    )


async def prepared(url: str, count: int) -> list[PreparedRequest]:
    target = demo_target(url, "floor")
    client = AihcClient(target, SelfMetrics())
    try:
        jobs = []
        page = 1
        while True:
            reply = await client.describe_jobs(None, page, 100, time.monotonic() + 60)
            jobs += [(j.job_id, j.queue_id) for j in reply.jobs or []]
            if len(reply.jobs or []) < 100:
                break
            page += 1
    finally:
        await client.close()
    types = list(target.effective_metric_types)
    end = int(time.time())
    requests = []
    for k in range(count):
        job_id, queue = jobs[k % len(jobs)]
        params = {"action": DESCRIBE_JOB_METRICS, "resourcePoolId": DEMO_RESOURCE_POOL}
        params["queueID"] = queue
        body = {
            "jobId": job_id,
            "metricType": types[(k // len(jobs)) % len(types)],
            "startTime": str(end - 2 * STEP),
            "endTime": str(end),
            "timeStep": str(STEP),
        }
        requests.append(client.signed("POST", "/", params, json_wire(body)))
    return requests


async def run(url: str, rate: float, count: int) -> tuple[int, float, int, int]:
    """(requests, CPU seconds, failed, blocks) of `count` calls at `rate`, the measured phase;
    blocks: how often the loop's thread blocked (`bench.measure.blocks`)."""
    requests = await prepared(url, count)
    limiter = AsyncLimiter(1, 1 / rate)  # one at a time, as the exporter's budget paces
    pending = iter(requests)
    failed = 0
    connector = aiohttp.TCPConnector(limit=CONNECTIONS, limit_per_host=CONNECTIONS)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal failed
            for request in pending:
                async with (
                    limiter,
                    session.request(
                        request.method,
                        request.url,
                        headers=dict(request.headers),
                        data=request.body,
                        allow_redirects=False,
                    ) as reply,
                ):
                    await reply.read()
                    failed += reply.status != 200

        started, blocked = time.process_time(), blocks(os.getpid())
        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
        cpu, blocked = time.process_time() - started, blocks(os.getpid()) - blocked
    return len(requests), cpu, failed, blocked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url")
    parser.add_argument("--rate", type=float, default=50.0, help="requests per second")
    parser.add_argument("--seconds", type=float, default=40.0)
    args = parser.parse_args()
    count, cpu, failed, blocked = asyncio.run(
        run(args.url, args.rate, int(args.rate * args.seconds))
    )
    print(f"floor requests={count} failed={failed} cpu_s={cpu:.3f} blocks={blocked}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
