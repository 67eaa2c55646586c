"""Fake Baidu AIHC OpenAPI (placeholder until the AIHC provider issue lands)."""

from __future__ import annotations

from aiohttp import web

DEMO_ACCESS_KEY_ID = "demo-aihc-access-key-id"
DEMO_SECRET_ACCESS_KEY = "demo-aihc-secret-access-key"
DEMO_RESOURCE_POOL = "cce-demo0001"


class AihcWorld:
    def __init__(self, seed: int = 1) -> None:
        self.seed = seed


def register_aihc(app: web.Application, world: AihcWorld) -> None:
    """Add the AIHC routes to `app`."""
