"""The store: the current snapshot of every target, swapped whole.

A poll never edits what a scrape may be reading: it builds a new `TargetSnapshot` and the
store replaces the target's entry and its version in one assignment, so a render sees every
target either before or after a poll, never a mix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from exporter.model import TargetSnapshot


@dataclass(frozen=True, slots=True)
class StoreView:
    version: int
    snapshots: Mapping[tuple[str, str], TargetSnapshot]

    def series_by_provider(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for (provider, _), snap in self.snapshots.items():
            counts[provider] = counts.get(provider, 0) + snap.series
        return counts


class SnapshotStore:
    def __init__(self) -> None:
        self._view = StoreView(0, MappingProxyType({}))
        self._listeners: list[Callable[[StoreView], None]] = []

    def view(self) -> StoreView:
        return self._view

    def get(self, provider: str, target: str) -> TargetSnapshot:
        return self._view.snapshots.get((provider, target)) or TargetSnapshot.empty(
            provider, target
        )

    def swap(self, snapshot: TargetSnapshot) -> None:
        snapshots = dict(self._view.snapshots)
        snapshots[(snapshot.provider, snapshot.target)] = snapshot
        self._view = StoreView(self._view.version + 1, MappingProxyType(snapshots))
        for listener in self._listeners:
            listener(self._view)

    def remove(self, provider: str, target: str) -> None:
        snapshots = dict(self._view.snapshots)
        if snapshots.pop((provider, target), None) is not None:
            self._view = StoreView(self._view.version + 1, MappingProxyType(snapshots))
            for listener in self._listeners:
                listener(self._view)

    def on_swap(self, listener: Callable[[StoreView], None]) -> None:
        self._listeners.append(listener)
