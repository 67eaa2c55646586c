"""Targets pointed at a served simulator, with its demo credentials."""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from exporter.providers.aihc import AihcTarget
from exporter.providers.alaya import AlayaJob, AlayaTarget
from exporter.simulator import Simulator
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY
from exporter.simulator.alaya import DEMO_API_KEY

TEST_POOL = "cce-test0001"


def aihc_target(url: str, **overrides: Any) -> AihcTarget:
    values: dict[str, Any] = {
        "name": "pool",
        "endpoint": url,
        "access_key_id": SecretStr(DEMO_ACCESS_KEY_ID),
        "secret_access_key": SecretStr(DEMO_SECRET_ACCESS_KEY),
        "resource_pool_id": TEST_POOL,
    }
    return AihcTarget.model_validate({**values, **overrides})


def alaya_target(url: str, simulator: Simulator, **overrides: Any) -> AlayaTarget:
    assert simulator.alaya is not None
    values: dict[str, Any] = {
        "name": "alaya",
        "endpoint": url,
        "api_key": SecretStr(DEMO_API_KEY),
        "jobs": [AlayaJob(id=j, pods=pods) for j, pods in simulator.alaya.jobs.items()],
    }
    return AlayaTarget.model_validate({**values, **overrides})
