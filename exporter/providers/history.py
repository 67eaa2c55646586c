"""Each provider's history reader for `backfill`, looked up here and nowhere else.

Until the provider registry lands (each provider folder exporting one object), this is the one
place outside `providers/<name>/` that names them; the registry's object should carry this
constructor (`history`), and this module go.
"""

from __future__ import annotations

from exporter.backfill.history import HistoryReader
from exporter.config import AihcTarget, AlayaTarget
from exporter.selfmetrics import SelfMetrics


def build_history_reader(target: AihcTarget | AlayaTarget, metrics: SelfMetrics) -> HistoryReader:
    if isinstance(target, AihcTarget):
        from exporter.providers.aihc.history import AihcHistory

        return AihcHistory(target, metrics)
    from exporter.providers.alaya.history import AlayaHistory

    return AlayaHistory(target, metrics)
