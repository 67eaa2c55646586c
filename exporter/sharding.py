"""Splitting one pool's jobs across replicas by a stable hash of (provider, job_id).

Every replica still reads the job lists whole (they are cheap and tell which jobs exist);
only the per-job calls and the exported series are limited to the replica's own jobs. The
request budget is the account's: each replica spends 1/N of it (`budget_share`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

from exporter.config import ShardConfig
from exporter.configkit import TargetBase

T = TypeVar("T", bound=TargetBase)


def shard_of(provider: str, job_id: str, count: int) -> int:
    # A cryptographic hash only for its stability across processes and versions.
    digest = hashlib.sha256(f"{provider}\x00{job_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def job_filter(shard: ShardConfig) -> Callable[[str, str], bool]:
    if shard.count == 1:
        return lambda provider, job_id: True
    return lambda provider, job_id: shard_of(provider, job_id, shard.count) == shard.index


def budget_share(target: T, shard: ShardConfig) -> T:
    """`target` with its replica's share of the budget: `requests_per_second` is the account's,
    and N replicas each sending it would send N times it to one account."""
    rate = target.limits.requests_per_second
    if shard.count == 1 or not rate:
        return target
    return target.at_rate(rate / shard.count)
