"""A share of the budget smaller than the workers can use: waiting for a slot is not a timeout.

Shard 0 of 20 on `requests_per_second: 10` is a 0.5 request/s share; with `max_concurrency: 8`
the eighth call waits 16 s for its slot, past a 10 s `timeout`. The exporter runs as a process
(the CLI, as shipped) against the simulator over HTTP, under libfaketime at SPEED times real
time: its clocks, sleeps and timeouts all run on that clock, so the issue's own 75 s take
75 / SPEED s here. The simulator runs in this process, in real time. SCALE 4 divides every
time and multiplies the budget (the same slots per timeout, the same workers per slot, and a
share of 2 a second, a whole number, where 0.5 is under one).
"""

from __future__ import annotations

import asyncio
import email.utils
from pathlib import Path

import aiohttp
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.soak.clock import SharedClock
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from tests.conftest import cli_env, listening, start_exporter
from tests.target_helpers import TEST_POOL

# The exporter's clock runs this many times faster than real time: a 10 s timeout is 2 s real,
# which a loaded 2-core machine still answers in.
SPEED = 5
# How long the exporter runs, on its own clock (the figure).
RUN = 75.0

pytestmark = pytest.mark.slow

Samples = dict[tuple[tuple[str, str], ...], float]


def samples(text: str, name: str) -> Samples:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def config(url: str, scale: float, secret: Path) -> str:
    target = {
        "name": "pool",
        "endpoint": url,
        "access_key_id": DEMO_ACCESS_KEY_ID,
        "secret_access_key_file": str(secret),
        "resource_pool_id": TEST_POOL,
        "limits": {
            "requests_per_second": 10 * scale,
            "max_concurrency": 8,
            "timeout": f"{10 / scale}s",
            "retries": 0,
        },
    }
    document = {
        "poll_interval": f"{60 / scale}s",
        "web": {"listen_address": "127.0.0.1:0"},
        "aihc": [target],
    }
    return yaml.safe_dump(document)


async def run(tmp_path: Path, scale: float, hang: bool = False) -> str:
    """The exporter's /metrics after it ran RUN / scale seconds of its own clock."""
    simulator = Simulator(seed=7, aihc=AihcWorld.fixed(jobs=20, pods_per_job=2))
    if hang:
        simulator.faults.hang_rate, simulator.faults.hang_seconds = 1.0, 3600.0
    secret, path, log = tmp_path / "sk", tmp_path / "exporter.yaml", tmp_path / "exporter.log"
    secret.write_text(DEMO_SECRET_ACCESS_KEY)
    async with running(simulator) as served:
        path.write_text(config(served.url, scale, secret))
        # The library preloaded into the exporter itself, not the `faketime` wrapper around it
        # (the wrapper forks, so terminating it would leave the exporter running), on the
        # clock of a holder under the wrapper (`bench.soak.clock`), which leaves nothing in
        # /dev/shm when it goes.
        clock = SharedClock(SPEED, tmp_path)
        clock.start()
        env = cli_env(**clock.preload())
        shard = ("--shard.index", "0", "--shard.count", "20")
        process = start_exporter(path, log, *shard, env=env)
        try:
            base = await listening(process, log)
            async with aiohttp.ClientSession() as session:
                async with session.get(f"{base}/-/healthy") as reply:
                    started = date(reply)
                await asyncio.sleep(RUN / scale / SPEED)
                async with session.get(f"{base}/metrics") as reply:
                    text, ended = await reply.text(), date(reply)
        finally:
            process.kill()
            process.wait(10)
            clock.stop()
    # The run took RUN / scale on the exporter's clock (its Date header is whole seconds).
    assert RUN / scale - 2 <= ended - started <= RUN / scale + 10, ended - started
    return text


def date(reply: aiohttp.ClientResponse) -> float:
    """The time on the exporter's clock when it answered."""
    return email.utils.parsedate_to_datetime(reply.headers["Date"]).timestamp()


def timeouts(text: str) -> float:
    requests = samples(text, "training_exporter_api_requests_total")
    return sum(v for labels, v in requests.items() if ("code", "timeout") in labels)


def answered(text: str) -> float:
    requests = samples(text, "training_exporter_api_requests_total")
    return sum(v for labels, v in requests.items() if ("code", "200") in labels)


@pytest.mark.parametrize("scale", [1.0, 4.0])
async def test_a_half_request_a_second_share_is_up_and_never_times_out(
    tmp_path: Path, scale: float
) -> None:
    text = await run(tmp_path, scale)
    (up,) = samples(text, "training_exporter_up").values()
    print(f"scale {scale}: up {up}, timeouts {timeouts(text)}, answered {answered(text)}")
    assert (up, timeouts(text)) == (1.0, 0.0), f"{answered(text)} answered"
    assert answered(text) >= 10


async def test_a_provider_that_hangs_still_times_out_at_timeout(tmp_path: Path) -> None:
    # In 75 s the listing has timed out (10 s each, then a new round every 60 s) more than once.
    text = await run(tmp_path, 1.0, hang=True)
    (up,) = samples(text, "training_exporter_up").values()
    assert up == 0.0
    assert timeouts(text) >= 2 and answered(text) == 0
