"""`--demo`: the simulator on loopback, and each provider's demo targets polling it.

What a provider's demo is (its world, its targets, anything it runs beside them, such as
Alaya's rotating jobs file) is its fake service's (`exporter.simulator.services`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from functools import partial

from exporter.config import Settings
from exporter.configkit import TargetBase
from exporter.logs import get_logger
from exporter.simulator import RequestLog, Simulator, running
from exporter.simulator.services import simulated

log = get_logger(__name__)

DEMO_POLL_INTERVAL = 15.0
DEMO_ROTATE_SECONDS = 30.0
DEMO_SEED = 42
DEMO_REQUESTS_KEPT = 1000


def demo_settings(settings: Settings, targets: Mapping[str, Sequence[TargetBase]]) -> Settings:
    """`settings` with the demo targets (provider name -> targets) added."""
    update: dict[str, object] = {
        name: [*settings.targets_of(name), *added] for name, added in targets.items()
    }
    update["poll_interval"] = min(settings.poll_interval, DEMO_POLL_INTERVAL)
    return settings.model_copy(update=update)


async def start_demo_targets(
    settings: Settings, stack: AsyncExitStack, rotate_every: float = DEMO_ROTATE_SECONDS
) -> Callable[[Settings], Settings]:
    """Start the demo's simulator and what each provider's demo runs beside it; what adds the
    demo targets to settings (at start, and to each reloaded configuration)."""
    poll_interval = min(settings.poll_interval, DEMO_POLL_INTERVAL)
    demos = {
        name: await service.demo(DEMO_SEED, stack, poll_interval, rotate_every)
        for name, service in simulated().items()
    }
    worlds = {name: demo.world for name, demo in demos.items()}
    # The demo never reads its requests back: a few, not the tests' 200,000 (13 MB an hour).
    simulator = Simulator(seed=DEMO_SEED, log=RequestLog(keep=DEMO_REQUESTS_KEPT), **worlds)
    served = await stack.enter_async_context(running(simulator))
    log.info("demo simulator started", url=served.url)
    targets = {name: demo.targets(served.url) for name, demo in demos.items()}
    return partial(demo_settings, targets=targets)
