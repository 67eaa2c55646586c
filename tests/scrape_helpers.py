"""Reading a scrape in tests: samples by name, and one sample's value by its labels; and
waiting, as Prometheus would, until scrapes hold what a test did.

A scrape is served the last complete rendering and never waits for the one under way, as in
production: a test that must see its own change first waits on a public signal, `/-/ready`
(every target's first round, rendered) or `Exposition.holds` (the store as it is now).

`Renders` counts the store's renderings, to show what does not render it again; `HeldRenders`
holds them up, to show what a scrape gets meanwhile."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families

from exporter.collector import Exposition
from exporter.rendering import Renderer, Rendering
from exporter.server import STATE
from exporter.store import SnapshotStore, StoreView

# sample name -> [(labels, value)]
Found = dict[str, list[tuple[dict[str, str], float]]]


def parse(text: str) -> Found:
    found: Found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


def value(found: Found, name: str, **labels: str) -> float | None:
    """The first sample of `name` whose labels include `labels`."""
    for got, number in found.get(name, []):
        if all(got.get(k) == v for k, v in labels.items()):
            return number
    return None


async def until_ready(client: TestClient[Any, Any], timeout: float = 30) -> None:
    """Until the app's `/-/ready` answers 200, as a readiness probe waits: every target's
    first round is over and scrapes are served a rendering that holds it."""
    deadline = asyncio.get_running_loop().time() + timeout
    scheduler = client.app[STATE].scheduler
    assert scheduler is not None and await scheduler.wait_ready(timeout)
    while (await client.get("/-/ready")).status != 200:
        assert asyncio.get_running_loop().time() < deadline, "not ready"
        await asyncio.sleep(0.01)


async def current(exposition: Exposition, store: SnapshotStore) -> None:
    """Until scrapes are served the rendering of `store` as it is now: for a test that changed
    the store (a poll) and scrapes to see it."""
    assert await exposition.holds(store.view().version, math.inf), "the store was not rendered"


async def rendered(app: web.Application) -> None:
    """`current` for the app's store."""
    await current(app[STATE].exposition, app[STATE].store)


class Renders:
    """How many times the store was rendered (`Renderer.render` calls) since this was made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        render = Renderer.render

        def counted(renderer: Renderer, view: StoreView) -> tuple[Rendering, ...]:
            self.count += 1
            return render(renderer, view)

        monkeypatch.setattr(Renderer, "render", counted)


class HeldRenders:
    """While held, every render of the store waits in its thread before it starts (as a slow
    render would): scrapes meanwhile get the rendering before. `release` lets them run."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._go = threading.Event()
        render = Renderer.render

        def held(renderer: Renderer, view: StoreView) -> tuple[Rendering, ...]:
            self._go.wait()
            return render(renderer, view)

        monkeypatch.setattr(Renderer, "render", held)

    def release(self) -> None:
        self._go.set()
