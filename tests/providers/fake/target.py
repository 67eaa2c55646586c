"""A fake target's configuration (`fake:` in the file): one endpoint and a bearer token."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Final

from pydantic import SecretStr, field_validator

from exporter.configkit import TargetBase, TierName, check_http_url

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

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_http_url(value)
