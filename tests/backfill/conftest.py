"""The backfill tests' shared fixtures: a configuration whose targets nobody answers, a fake
remote-write store on a real socket, and a history read once through the file path."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from exporter.simulator import running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY
from tests.backfill.backfill_helpers import FilePath, backfill, history, options, write_config
from tests.backfill.remote_helpers import FakeStore, openmetrics_samples, serve

# Nothing listens there: any call would fail, and none must be made.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "exporter.yaml"
    aihc = {
        "name": "pool-a",
        "endpoint": NOWHERE,
        "access_key_id": DEMO_ACCESS_KEY_ID,
        "secret_access_key": DEMO_SECRET_ACCESS_KEY,
        "resource_pool_id": "cce-1",
    }
    alaya = {"name": "alaya-a", "endpoint": NOWHERE, "api_key": "k", "jobs": []}
    path.write_text(yaml.safe_dump({"aihc": [aihc], "alaya": [alaya]}))
    return path


@pytest.fixture
async def store() -> AsyncIterator[FakeStore]:
    fake = FakeStore()
    runner = await serve(fake)
    yield fake
    await runner.cleanup()


@pytest.fixture(scope="session")
def file_path(tmp_path_factory: pytest.TempPathFactory) -> FilePath:
    """Two hours of history (a running and a finished job on each provider, the AIHC one's end
    50 minutes after its start in the window), read once by `backfill` into a file: the
    reference the remote write's tests hold each store to, and the file the end-to-end test
    holds to the simulator. Its run (a backfill process, ~1.2 CPU-s) is shared by every test on
    this worker."""
    tmp = tmp_path_factory.mktemp("file-path")
    world = history(time.time(), hours=2, seed=11)

    async def read() -> None:
        async with running(world.simulator) as served:
            config = write_config(tmp / "exporter.yaml", served.url, world)
            run = await backfill(*options(config, world, "history.om"), cwd=tmp)
        assert run.code == 0, run.stderr

    asyncio.run(read())
    output = tmp / "history.om"
    return FilePath(world, output, openmetrics_samples(output.read_text()))
