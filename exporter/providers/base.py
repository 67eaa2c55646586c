"""What every provider offers its target's runner (`exporter.work.runner`).

A provider answers two questions. `list_jobs()`, once a round: which jobs exist now, the parts each
of them has, the parts the list itself gives (job info and status), and the *units* to read
(an AIHC job, an Alaya pod), each with its items (one call each). `read()`: one item of one
unit, as that item's parts. When and how often each item is read, under which budget, is the
runner's business, never the provider's.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from exporter.model import Failed, Sample

if TYPE_CHECKING:
    from exporter.status import CallLog
    from exporter.transport.gate import Gate


@dataclass(frozen=True, slots=True)
class TierPlan:
    """A target's tiers: configured interval and items of each, in TIERS order. Made by the
    poll core (`exporter.work.tiers`); here because every provider is handed one."""

    intervals: Mapping[str, float]
    items: Mapping[str, tuple[str, ...]]
    # Items that show a unit's state (`TargetBase.state_items`): read first among reads due
    # at once, so a new job's phase shows before its medium-tier metrics.
    first: frozenset[str] = frozenset()

    def tier_of(self, item: str) -> str:
        for tier, items in self.items.items():
            if item in items:
                return tier
        raise KeyError(item)


@dataclass(frozen=True, slots=True)
class PollContext:
    """Facts about the round whose job list is being read."""

    # time.monotonic() by which the listing should be over (retries stop before it).
    deadline: float
    # time.time() at the round's start.
    started_at: float
    # Whether a job of this provider belongs to this replica (sharding); all by default.
    owns_job: Callable[[str], bool] = lambda job_id: True


class ReadContext(NamedTuple):
    """Facts about one call being made (a tuple: one is made a read)."""

    # time.monotonic() by which the call and its retries should be over.
    deadline: float
    # time.time() when the call was taken from the queue: the `now` of metric windows.
    now: float


@dataclass(frozen=True, slots=True)
class Unit:
    """What per-job calls are made for: an AIHC job, or one pod of an Alaya job."""

    key: Hashable
    job_id: str
    items: tuple[str, ...]


PartSamples = Sequence[Sample] | Failed


@dataclass(slots=True)
class Listing:
    """What a round's job list said.

    `parts`: every job the target exports now, with every part it has (read yet or not);
    a part the runner holds that is not named here is dropped. `listed` False: the list could
    not be read (or could not be trusted), so every job exported before is carried.
    """

    listed: bool = True
    parts: dict[str, frozenset[str]] = field(default_factory=dict)
    # Parts the list itself gives, read afresh this round.
    readings: dict[str, dict[str, PartSamples]] = field(default_factory=dict)
    # In the order they should be read first: jobs already exported before new ones.
    units: list[Unit] = field(default_factory=list)
    # Read once, at once, then kept while the job is listed (a finished job's last state).
    finals: list[Unit] = field(default_factory=list)
    failed_requests: int = 0
    # Requests the listing made: the plan's cost of the list each round.
    requests: int = 0
    # Jobs the list named that the job cap left out.
    left_out: int = 0


@dataclass(slots=True)
class ReadResult:
    job_id: str
    outcomes: dict[str, PartSamples] = field(default_factory=dict)
    # The call failed after its retries.
    failed: bool = False
    # The job no longer exists (deleted since the list named it): drop it until it is listed.
    gone: bool = False


class Provider(Protocol):
    """One configured target."""

    provider: str
    target: str
    tiers: TierPlan
    # Closed while the provider asked to wait (Retry-After) or refused the credentials.
    gate: Gate
    # Its client's recent attempts, for the status pages (`exporter.status`).
    call_log: CallLog

    async def list_jobs(self, context: PollContext) -> Listing: ...

    async def read(self, unit: Unit, item: str, context: ReadContext) -> ReadResult: ...

    async def close(self) -> None: ...

    def describe(self) -> Mapping[str, str]:
        """Non-secret facts for the landing page (endpoint, pool, job count)."""
        ...
