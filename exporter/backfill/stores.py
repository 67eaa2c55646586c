"""What a store takes, asked before anything is sent.

- Prometheus (its `/api/v1/status/buildinfo` has a version): a sample reaches back
  `storage.tsdb.out_of_order_time_window` behind the head's newest sample
  (`/api/v1/status/config`, `/api/v1/status/tsdb`), or, for a new series in time order, half
  the head's chunk range (`--storage.tsdb.min-block-duration`, 2h: an hour), whichever is
  longer. Anything older is refused, and the whole request with it.
- VictoriaMetrics (its `/metrics` counts `vm_rows_inserted_total`): anything inside
  `-retentionPeriod` (a bare number is months, of 31 days), in any order; older samples are
  dropped while the request succeeds, so its `vm_rows_ignored_total` and
  `vm_rows_invalid_total` are read before and after to say how many.
- Any other store (or `--remote-write.window`): the window it is told, or none known: then
  everything is sent, and whatever the store refuses is counted and kept for promtool.

The remote-write URL's root is the store's when it ends in `/api/v1/write`; the probes use the
same credentials.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from exporter.backfill.remote_write import RemoteWriteClient, StoreStopped, base_url, clean

# Samples this close to the window's edge are kept back too: the head moves while we send.
GUARD: Final = 300.0
PROMETHEUS_CHUNK_RANGE: Final = 7200.0
MONTH: Final = 31 * 86400.0
_UNITS: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_VM_FLAG: Final = re.compile(r'^flag\{name="retentionPeriod", value="([^"]*)"', re.MULTILINE)
_VM_COUNTER: Final = re.compile(
    r"^(vm_rows_ignored_total|vm_rows_invalid_total)\{(?:reason|type)=\"([a-z_]+)\"\} (\d+)",
    re.MULTILINE,
)


def store_duration(text: str, bare: float = 1.0) -> float:
    """`1h30m`, `2w`, `1y` as seconds; a bare number times `bare` seconds; ValueError."""
    text = text.strip()
    try:
        return float(text) * bare
    except ValueError:
        pass
    if not text or _DURATION.sub("", text):
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in _DURATION.findall(text))


@dataclass(slots=True)
class Store:
    kind: str
    # How far behind its newest sample the store takes one; None: not known, send everything.
    window: float | None
    # Where the window comes from, for the report.
    why: str
    # The store's newest sample minus our clock, when it is ahead.
    ahead: float = 0.0
    # VictoriaMetrics' counters of rows it dropped, when the probe started.
    dropped: dict[str, int] = field(default_factory=dict)

    def cutoff(self, now: float) -> float | None:
        """The oldest time to send at `now`: the window behind the head, less the guard."""
        if self.window is None:
            return None
        return now + self.ahead - self.window + min(GUARD, self.window / 4)

    def describe(self) -> str:
        if self.window is None:
            return f"{self.kind}: {self.why}; every sample is sent"
        return f"{self.kind}: takes samples up to {_span(self.window)} old ({self.why})"


def _span(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:g}d"
    if seconds >= 3600:
        return f"{seconds / 3600:g}h"
    return f"{seconds / 60:g}m"


async def _json(client: RemoteWriteClient, url: str) -> Any:
    status, body = await client.get(url)
    if status != 200:
        raise StoreStopped(f"GET {clean(url)}: HTTP {status}")
    try:
        return json.loads(body)["data"]
    except (ValueError, KeyError, TypeError):
        raise StoreStopped(f"GET {clean(url)}: not the Prometheus API's JSON") from None


async def _prometheus(client: RemoteWriteClient, root: str, version: str) -> Store:
    config = yaml.safe_load((await _json(client, f"{root}/api/v1/status/config"))["yaml"])
    tsdb = ((config or {}).get("storage") or {}).get("tsdb") or {}
    ooo = store_duration(str(tsdb.get("out_of_order_time_window") or "0s"))
    flags = await _json(client, f"{root}/api/v1/status/flags")
    block = store_duration(str(flags.get("storage.tsdb.min-block-duration") or "2h"))
    head = (await _json(client, f"{root}/api/v1/status/tsdb"))["headStats"]["maxTime"]
    # An empty head's maxTime is the smallest int64.
    ahead = max(0.0, head / 1000 - time.time()) if head > 0 else 0.0
    if ooo > block / 2:
        why = f"out_of_order_time_window {_span(ooo)}"
    else:
        why = "no out_of_order_time_window: a new series reaches back half the head's block"
    return Store(f"Prometheus {version}", max(ooo, block / 2), why, ahead)


async def victoria_counters(client: RemoteWriteClient, root: str) -> tuple[float, dict[str, int]]:
    """VictoriaMetrics' retention, and its counters of dropped and invalid rows by reason."""
    status, body = await client.get(f"{root}/metrics")
    text = body.decode("utf-8", "replace")
    if status != 200 or "vm_rows_inserted_total" not in text:
        raise StoreStopped(f"GET {clean(root)}/metrics: not VictoriaMetrics")
    flag = _VM_FLAG.search(text)
    retention = store_duration(flag.group(1) if flag else "1", bare=MONTH)
    counters = {f"{name}:{why}": int(n) for name, why, n in _VM_COUNTER.findall(text)}
    return retention, counters


async def probe(client: RemoteWriteClient, told: float | None) -> Store:
    """What the store behind `client` takes: the window it is `told`, or asked from it."""
    root = base_url(client.url)
    if told is not None:
        return Store("store", told or None, "--remote-write.window")
    if root is None:
        return Store("store", None, "its URL is not .../api/v1/write, so it cannot be asked")
    status, body = await client.get(f"{root}/api/v1/status/buildinfo")
    try:
        version = json.loads(body)["data"]["version"] if status == 200 else None
    except (ValueError, KeyError, TypeError):
        version = None
    if version:
        version = clean(str(version))[:40]
        try:
            return await _prometheus(client, root, version)
        except (StoreStopped, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):
            why = "its configuration could not be read: no out-of-order window assumed"
            return Store(f"Prometheus {version}", PROMETHEUS_CHUNK_RANGE / 2, why)
    try:
        retention, counters = await victoria_counters(client, root)
    except StoreStopped:
        return Store("store", None, "neither Prometheus nor VictoriaMetrics answered its probes")
    return Store("VictoriaMetrics", retention, f"-retentionPeriod {_span(retention)}", 0, counters)
