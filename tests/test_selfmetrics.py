"""The exporter's own series of targets and providers a reload removes go with them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import generate_latest

from exporter.config import load_settings
from exporter.server import STATE, build_app
from exporter.simulator import RunningSimulator, Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from exporter.simulator.alaya import DEMO_API_KEY
from tests.scrape_helpers import rendered
from tests.test_reload import Series, parse, until, value

POOLS = {"cce-a": ["q"], "cce-b": ["q"]}


def providers_of(series: Series, name: str) -> set[str]:
    return {labels["provider"] for found, labels, _ in series if found == name}


def targets_of(series: Series, name: str) -> set[str]:
    return {labels["target"] for found, labels, _ in series if found == name}


@pytest.fixture
async def served() -> AsyncIterator[RunningSimulator]:
    world = AihcWorld.fixed(seed=8, pools=POOLS, jobs=4, pods_per_job=1)
    async with running(Simulator(seed=8, aihc=world)) as up:
        yield up


async def test_a_reload_that_removes_a_provider_s_last_target_removes_its_series(
    aiohttp_client: Callable[..., Any], served: RunningSimulator, tmp_path: Path
) -> None:
    path = tmp_path / "exporter.yaml"
    assert served.simulator.alaya is not None
    alaya_jobs = [{"id": j, "pods": p} for j, p in served.simulator.alaya.jobs.items()]

    def write(*aihc: str) -> None:
        aihc_targets = [
            {
                "name": name,
                "endpoint": served.url,
                "access_key_id": DEMO_ACCESS_KEY_ID,
                "secret_access_key": DEMO_SECRET_ACCESS_KEY,
                "resource_pool_id": f"cce-{name}",
                "metric_types": ["GpuUsage"],
                "events": False,
                "limits": {"requests_per_second": "unlimited"},
            }
            for name in aihc
        ]
        alaya = {
            "name": "x",
            "endpoint": served.url,
            "api_key": DEMO_API_KEY,
            "jobs": alaya_jobs,
            "limits": {"requests_per_second": "unlimited"},
        }
        document = {"poll_interval": "1s", "web": {"enable_lifecycle": True}}
        path.write_text(yaml.safe_dump({**document, "aihc": aihc_targets, "alaya": [alaya]}))

    write("a", "b")
    app = build_app(load_settings(path), load=lambda: load_settings(path))
    client = await aiohttp_client(app)
    assert await app[STATE].scheduler.wait_ready(20)

    async def scrape() -> Series:
        return parse(await (await client.get("/metrics")).text())

    requests = "training_exporter_api_requests_total"
    both = await until(scrape, lambda s: targets_of(s, requests) == {"a", "b", "x"})
    assert providers_of(both, "training_exporter_series") == {"aihc", "alaya"}

    # One of two AIHC targets goes: its requests go, the provider's series stay.
    write("a")
    assert (await client.post("/-/reload")).status == 200
    one = await scrape()
    assert targets_of(one, requests) == {"a", "x"}
    assert providers_of(one, "training_exporter_series") == {"aihc", "alaya"}

    # The last one goes: every series that names AIHC goes with it.
    write()
    assert (await client.post("/-/reload")).status == 200
    polls = value(await scrape(), "training_exporter_poll_duration_seconds_count", target="x")
    assert polls is not None
    # After a round of the target that stays, so nothing brings them back.
    await until(
        scrape,
        lambda s: (
            (value(s, "training_exporter_poll_duration_seconds_count", target="x") or 0) > polls
        ),
    )
    # The poll count is current in every scrape; the jobs' series once rendered.
    await rendered(app)
    none = await scrape()
    assert {labels.get("provider") for _, labels, _ in none} - {None} == {"alaya"}
    assert targets_of(none, requests) == {"x"}
    assert b"_created" not in generate_latest(app[STATE].metrics.registry)
