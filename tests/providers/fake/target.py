"""A fake target's configuration (`fake:` in the file): one endpoint and a bearer token."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Final

from pydantic import SecretStr

from exporter.configkit import TargetBase, TierName

NAME: Final = "fake"
LOAD: Final = "load"


class FakeTarget(TargetBase):
    provider: ClassVar[str] = NAME
    items: ClassVar[tuple[str, ...]] = (LOAD,)
    default_tiers: ClassVar[Mapping[str, TierName]] = {LOAD: "fast"}
    endpoint: str
    # Resolved like any provider's secret: inline, `token_file`, or TJE_FAKE_TOKEN.
    token: SecretStr | None = None
    token_file: Path | None = None
