"""The provider registry: what it accepts, and that the configuration is built from it."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from exporter.config import Settings
from exporter.providers.aihc import PROVIDER as AIHC
from exporter.providers.aihc import AihcTarget
from exporter.providers.registry import BUILT_IN, RegistryError, checked, registered, spec_of
from exporter.work.tiers import default_tier


def test_every_registered_provider_has_its_key_in_the_configuration() -> None:
    names = [spec.name for spec in registered()]
    assert names[: len(BUILT_IN)] == ["aihc", "alaya"]
    assert set(names) <= set(Settings.model_fields)


def test_a_target_finds_its_provider_and_its_default_tiers() -> None:
    target = AihcTarget(name="a", resource_pool_id="p")
    assert spec_of(target) is AIHC
    assert default_tier("aihc", "GpuUsage") == "fast"
    assert default_tier("aihc", "GpuTemperature") == "slow"
    assert default_tier("alaya", "basic") == "medium"


class _Renamed(AihcTarget):
    provider: ClassVar[str] = "web"


class _Untiered(AihcTarget):
    provider: ClassVar[str] = "untiered"
    default_tiers: ClassVar[dict[str, str]] = {"GpuUsage": "fast"}  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("specs", "problem"),
    [
        ([AIHC, AIHC], "registered twice"),
        ([dataclasses.replace(AIHC, target=_Renamed)], "not a key"),
        ([dataclasses.replace(AIHC, target=_Untiered)], "must name every item"),
    ],
)
def test_a_provider_that_cannot_be_configured_is_refused(specs: list, problem: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(RegistryError, match=problem):
        checked(specs)
