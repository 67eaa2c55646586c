"""Each provider's fake service, as the simulator serves it and the demo polls it.

A provider names its fake in `ProviderSpec.simulated` ("module:attribute"); this module loads
them, in the registry's order. Loaded by name rather than imported by the provider: a fake
signs and decodes with its provider's own code, so it sits above the provider, and the
exporter's run path (no `--demo`) never loads one.
"""

from __future__ import annotations

import argparse
import functools
from contextlib import AsyncExitStack
from importlib import import_module
from typing import Any, Protocol

from aiohttp import web

from exporter.configkit import TargetBase
from exporter.providers.registry import registered


class SimulatedProvider(Protocol):
    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """The `simulate` command's options for this fake's world."""
        ...

    def world(self, seed: int, args: argparse.Namespace | None = None) -> Any:
        """The world served by default, or as `simulate`'s options (`args`) ask."""
        ...

    def register(self, app: web.Application, world: Any) -> None:
        """Add the fake's routes, serving `world`; their paths must not clash with others'."""
        ...

    def greeting(self, world: Any) -> list[str]:
        """What `simulate` prints at start: the demo credentials and ids to configure."""
        ...

    async def demo(
        self, seed: int, stack: AsyncExitStack, poll_interval: float, rotate_every: float
    ) -> DemoService:
        """The world the demo serves, and what it runs beside it (on `stack`)."""
        ...


class DemoService(Protocol):
    world: Any

    def targets(self, url: str) -> list[TargetBase]:
        """The demo's targets of this provider, polling the simulator at `url`."""
        ...


@functools.cache
def simulated() -> dict[str, SimulatedProvider]:
    """Provider name -> its fake service, for every provider that has one."""
    found: dict[str, SimulatedProvider] = {}
    for spec in registered():
        if spec.simulated:
            module, _, attribute = spec.simulated.partition(":")
            found[spec.name] = getattr(import_module(module), attribute)
    return found
