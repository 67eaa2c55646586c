"""Fake Alaya NeW training API (placeholder until the Alaya provider issue lands)."""

from __future__ import annotations

from aiohttp import web

DEMO_API_KEY = "demo-alaya-api-key"


class AlayaWorld:
    def __init__(self, seed: int = 1) -> None:
        self.seed = seed
        # job id -> pod names
        self.jobs: dict[str, list[str]] = {}


def register_alaya(app: web.Application, world: AlayaWorld) -> None:
    """Add the Alaya routes to `app`."""
