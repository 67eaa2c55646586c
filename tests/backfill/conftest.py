"""The backfill tests' shared fixtures: a configuration whose targets nobody answers, and a
fake remote-write store on a real socket."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml

from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY
from tests.backfill.remote_helpers import FakeStore, serve

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
