"""TLS and basic auth for the exporter's endpoints (placeholder until its issue lands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exporter.config import ConfigError


def load_web_config(path: Path) -> Any:
    raise ConfigError([f"web.config_file: {path}: TLS and basic auth are not implemented yet"])
