"""`--demo`: the simulator on loopback, and one AIHC and one Alaya target polling it."""

from __future__ import annotations

from contextlib import AsyncExitStack

from pydantic import SecretStr

from exporter.config import AihcTarget, AlayaJob, AlayaTarget, Settings
from exporter.logs import get_logger
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_RESOURCE_POOL, DEMO_SECRET_ACCESS_KEY
from exporter.simulator.alaya import DEMO_API_KEY

log = get_logger(__name__)

DEMO_POLL_INTERVAL = 15.0


def demo_settings(settings: Settings, url: str, simulator: Simulator) -> Settings:
    """`settings` with the demo targets added, pointed at a simulator served at `url`."""
    assert simulator.alaya is not None
    aihc = AihcTarget(
        name="demo-aihc",
        endpoint=url,
        access_key_id=SecretStr(DEMO_ACCESS_KEY_ID),
        secret_access_key=SecretStr(DEMO_SECRET_ACCESS_KEY),
        resource_pool_id=DEMO_RESOURCE_POOL,
    )
    alaya = AlayaTarget(
        name="demo-alaya",
        endpoint=url,
        api_key=SecretStr(DEMO_API_KEY),
        jobs=[AlayaJob(id=job_id, pods=pods) for job_id, pods in simulator.alaya.jobs.items()],
    )
    return settings.model_copy(
        update={
            "aihc": [*settings.aihc, aihc],
            "alaya": [*settings.alaya, alaya],
            "poll_interval": min(settings.poll_interval, DEMO_POLL_INTERVAL),
        }
    )


async def start_demo(settings: Settings, stack: AsyncExitStack) -> Settings:
    simulator = Simulator(seed=42)
    served = await stack.enter_async_context(running(simulator))
    log.info("demo simulator started", url=served.url)
    return demo_settings(settings, served.url, simulator)
