"""The providers this exporter knows: the built-in ones, and those other distributions add.

A provider is its folder, `exporter/providers/<name>/`, exporting one `ProviderSpec`; built-in
ones are listed in `BUILT_IN`, and an installed distribution adds one with an entry point in
the group `ENTRY_POINT_GROUP` (`fake = tests.providers.fake.provider:PROVIDER`): that is how
the test suite's third provider runs through the command line with no edit outside its folder.
The configuration's target lists are built from `registered()` when `exporter.config` is first
imported, so a provider is known to a process from its start.
"""

from __future__ import annotations

import functools
import re
from importlib.metadata import entry_points
from typing import Final

from exporter.configkit import TargetBase
from exporter.providers.aihc import PROVIDER as AIHC
from exporter.providers.alaya import PROVIDER as ALAYA
from exporter.providers.spec import ProviderSpec

BUILT_IN: Final = (AIHC, ALAYA)
ENTRY_POINT_GROUP: Final = "training_job_exporter.providers"
# A name is a configuration key, a label value and part of an environment variable's name.
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
# Keys of the configuration file that are not target lists.
RESERVED: Final = frozenset(
    {"web", "poll_interval", "stale_after", "log", "shard", "demo", "targets"}
)


class RegistryError(Exception):
    """A provider that cannot be registered: the process stops before it reads its config."""


@functools.cache
def registered() -> tuple[ProviderSpec, ...]:
    """Every provider, built-in ones first, then entry points by name."""
    found = list(BUILT_IN)
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        spec = point.load()
        if not isinstance(spec, ProviderSpec):
            raise RegistryError(f"entry point {point.name} = {point.value}: not a ProviderSpec")
        found.append(spec)
    return checked(found)


def checked(found: list[ProviderSpec]) -> tuple[ProviderSpec, ...]:
    """The providers, refused (`RegistryError`) when a name is not a lowercase identifier or is
    a configuration key, is given twice, or a provider's default tiers miss an item."""
    names: set[str] = set()
    for spec in found:
        if not _NAME.match(spec.name) or spec.name in RESERVED:
            raise RegistryError(f"provider name {spec.name!r}: a lowercase identifier, not a key")
        if spec.name in names:
            raise RegistryError(f"provider {spec.name!r} is registered twice")
        unknown = set(spec.default_tiers) ^ set(spec.items)
        if unknown:
            raise RegistryError(f"provider {spec.name!r}: default_tiers must name every item")
        names.add(spec.name)
    return tuple(found)


def titles() -> str:
    """The providers' full names in a sentence: "Baidu AIHC and Alaya NeW Cloud"."""
    names = [spec.title for spec in registered()]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)


def named(name: str) -> ProviderSpec:
    for spec in registered():
        if spec.name == name:
            return spec
    raise KeyError(name)


def spec_of(target: TargetBase) -> ProviderSpec:
    """The provider whose target `target` is."""
    return named(target.provider)


__all__ = ["BUILT_IN", "ENTRY_POINT_GROUP", "ProviderSpec", "named", "registered", "spec_of"]
