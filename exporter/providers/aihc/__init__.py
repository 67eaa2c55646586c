"""Baidu AIHC (百舸) provider: bce-auth-v1 signed OpenAPI v2 calls, mapped to the contract."""

from __future__ import annotations

from exporter.providers.aihc.provider import AihcProvider

__all__ = ["AihcProvider"]
