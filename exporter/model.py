"""The data that flows one way: provider -> samples -> snapshot -> exposition.

A target's runner publishes `Update`s: what the job list said (which jobs exist now and which
parts each of them has), and the outcomes of the calls made since the last update, each a
`Reading` (samples, and the refresh tier that read them) or `FAILED`. `merge` turns the
target's previous snapshot and an update into the next immutable `TargetSnapshot`:

- a part read afresh replaces the old one;
- a part not read in this update (its tier was not due) is kept, as is a failed one, until it
  is older than its tier's bound (`bounds[tier]`), so a slow tier's data lives between two of
  its reads and a fast tier's goes soon after its reads stop;
- a job the listing does not name, or a part its listing does not name, is gone at once.

Nothing else decides what is stale. Ages are on the monotonic clock (`now`, `fetched_at`: the
runner's `time.monotonic()`): a wall-clock step of +2 h dropped every series within 25 s.
"""

from __future__ import annotations

import functools
import itertools
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, NamedTuple, TypeVar, overload

JOB_LABELS: Final = ("provider", "resource_pool", "queue", "job_id")
POD_LABELS: Final = (*JOB_LABELS, "pod")
CARD_LABELS: Final = (*POD_LABELS, "gpu")
TARGET_LABELS: Final = ("provider", "target")

# The tier of parts read once and kept while their job is listed (a finished job's last pods
# and events): they never go stale.
FINAL_TIER: Final = "final"


class Sample(NamedTuple):
    """One series: `name` is the sample name as exposed (a counter's ends in `_total`)."""

    name: str
    label_names: tuple[str, ...]
    label_values: tuple[str, ...]
    value: float


# Sample's own __new__ is a Python function; at 100k samples a poll, skipping it is worth it.
new_sample = functools.partial(tuple.__new__, Sample)


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    """What a part's samples say but their values: each sample's name, label names and label
    values, in order. A name, or a label-name tuple, that every sample has is kept once (a
    metric part is one family with one label-name tuple). A part read again with the same
    series keeps its previous read's shape."""

    # One per sample, or one for all.
    names: tuple[str, ...]
    label_names: tuple[tuple[str, ...], ...]
    label_values: tuple[tuple[str, ...], ...]

    @classmethod
    def of(
        cls,
        names: Sequence[str],
        label_names: Sequence[tuple[str, ...]],
        label_values: Sequence[tuple[str, ...]],
    ) -> Shape:
        return cls(_once(names), _once(label_names), tuple(label_values))

    def __len__(self) -> int:
        return len(self.label_values)

    def same(self, other: Shape) -> bool:
        return (
            self.names == other.names
            and self.label_values == other.label_values
            and self.label_names == other.label_names
        )

    def name(self, index: int) -> str:
        return self.names[index if len(self.names) > 1 else 0]

    def names_at(self, index: int) -> tuple[str, ...]:
        """The label names of sample `index`."""
        return self.label_names[index if len(self.label_names) > 1 else 0]

    def rows(self) -> Iterator[tuple[str, tuple[str, ...], tuple[str, ...]]]:
        count = len(self.label_values)
        return zip(_each(self.names, count), _each(self.label_names, count), self.label_values)

    def values_of(self, name: str, values: Sequence[float]) -> Sequence[float]:
        """Of `values` (one per sample), those of the samples named `name`."""
        if len(self.names) == 1 and len(values) > 1:
            return values if self.names[0] == name else []
        return [v for n, v in zip(self.names, values, strict=True) if n == name]


T = TypeVar("T")


def _once(column: Sequence[T]) -> tuple[T, ...]:
    """`column` as a tuple, or its first item alone when every item is equal to it."""
    if len(column) > 1 and column.count(column[0]) == len(column):
        return (column[0],)
    return tuple(column)


def _each(column: tuple[T, ...], count: int) -> Iterable[T]:
    return column if len(column) == count else itertools.repeat(column[0], count)


class Samples(Sequence[Sample]):
    """A part's samples as the store keeps them: a `Shape` and an array of the values (8 bytes
    a series, where a `Sample` and its float took 104), read back as `Sample`s."""

    __slots__ = ("shape", "values")

    def __init__(self, shape: Shape, values: array[float]) -> None:
        self.shape = shape
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Sample]:
        return map(new_sample, map(_with, self.shape.rows(), self.values))

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Sample, ...]: ...

    def __getitem__(self, index: int | slice) -> Sample | tuple[Sample, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        shape = self.shape
        row = (shape.name(index), shape.names_at(index), shape.label_values[index])
        return new_sample((*row, self.values[index]))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Samples({list(self)!r})"


def _with(row: tuple[str, tuple[str, ...], tuple[str, ...]], value: float) -> tuple[object, ...]:
    return (*row, value)


class Failed:
    """Marks a part whose call failed this time."""

    _instance: Failed | None = None

    def __new__(cls) -> Failed:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "FAILED"


FAILED: Final = Failed()


class Reading(NamedTuple):
    """A part read afresh, and the refresh tier whose bound it lives under."""

    samples: Sequence[Sample]
    tier: str


PartOutcome = Reading | Failed


@dataclass(frozen=True, slots=True)
class Part:
    # As read (a tuple, or `Samples` a provider packed), or as the store keeps them (`Samples`,
    # `exporter.store.share_labels`).
    samples: Sequence[Sample]
    # time.monotonic() of the read.
    fetched_at: float
    tier: str
    # The last read of this part failed: it is served from an earlier one.
    failed: bool = False


@dataclass(frozen=True, slots=True)
class JobData:
    job_id: str
    parts: Mapping[str, Part]
    # Counted once: every merge counts every job's series against `max_series`, and its
    # parts served from an earlier read.
    series: int = field(init=False, compare=False)
    failed: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        parts = self.parts.values()
        object.__setattr__(self, "series", sum([len(p.samples) for p in parts]))
        object.__setattr__(self, "failed", sum([p.failed for p in parts]))


@dataclass(frozen=True, slots=True)
class TargetSnapshot:
    """Everything one target currently exports. Never mutated: the store swaps it whole."""

    provider: str
    target: str
    jobs: Mapping[str, JobData]
    taken_at: float
    series: int

    @classmethod
    def empty(cls, provider: str, target: str) -> TargetSnapshot:
        return cls(provider, target, MappingProxyType({}), 0.0, 0)

    def samples(self) -> list[Sample]:
        return [s for job in self.jobs.values() for p in job.parts.values() for s in p.samples]


@dataclass(slots=True)
class Update:
    """What a target learnt since its last update.

    `parts` None: this update has no listing, the jobs and their parts are those of the
    snapshot. Otherwise it maps every job the target exports now to the parts it has; with
    `listed` False the list could not be read, so every previous job is carried (under the
    staleness rule) beside those named. `outcomes` holds the parts read or failed meanwhile.
    """

    parts: dict[str, frozenset[str]] | None = None
    listed: bool = True
    outcomes: dict[str, dict[str, PartOutcome]] = field(default_factory=dict)

    def put(self, job_id: str, part: str, outcome: PartOutcome) -> None:
        self.outcomes.setdefault(job_id, {})[part] = outcome

    @classmethod
    def of(cls, jobs: Mapping[str, Mapping[str, Sequence[Sample]]], tier: str = "fast") -> Update:
        """An update naming exactly `jobs`, every part read afresh in `tier`."""
        return cls(
            {job: frozenset(parts) for job, parts in jobs.items()},
            True,
            {job: {p: Reading(s, tier) for p, s in parts.items()} for job, parts in jobs.items()},
        )


@dataclass(frozen=True, slots=True)
class MergeOutcome:
    snapshot: TargetSnapshot
    # Parts served from an earlier read because their last read failed.
    stale_parts: int
    # Parts dropped this merge because they outlived their tier's bound.
    expired_parts: int
    jobs_left_out: tuple[str, ...]


def _limits(bounds: Mapping[str, float]) -> dict[str, float]:
    """Each tier's bound, the final tier's infinite (a tier without one: 0)."""
    return {**bounds, FINAL_TIER: math.inf}


def merge(
    previous: TargetSnapshot,
    update: Update,
    now: float,
    bounds: Mapping[str, float],
    max_series: int | None = None,
) -> MergeOutcome:
    """The next snapshot of a target from its previous one and an update.

    A job with nothing new and nothing expired keeps its `JobData` object, so the store and the
    exposition can tell it did not change.
    """
    limits = _limits(bounds)
    jobs: dict[str, JobData] = {}
    left_out: list[str] = []
    total = stale = expired = 0
    wanted = _wanted(previous, update)
    # Jobs already exported come first, so the series limit never swaps one job for another.
    for job_id in sorted(wanted, key=lambda j: j not in previous.jobs):
        old = previous.jobs.get(job_id)
        outcomes = update.outcomes.get(job_id, {})
        parts, dropped = _job_parts(old, wanted[job_id], outcomes, now, limits)
        expired += dropped
        if not parts:
            continue
        job = old if old is not None and parts is old.parts else JobData(job_id, parts)
        if max_series is not None and total + job.series > max_series:
            left_out.append(job_id)
            continue
        total += job.series
        stale += job.failed
        jobs[job_id] = job
    snapshot = TargetSnapshot(
        previous.provider, previous.target, MappingProxyType(jobs), now, total
    )
    return MergeOutcome(snapshot, stale, expired, tuple(left_out))


def _wanted(previous: TargetSnapshot, update: Update) -> Mapping[str, frozenset[str] | None]:
    """Every job of the next snapshot, and the parts its listing names (None: as it was)."""
    if update.parts is None:
        return dict.fromkeys(previous.jobs)
    if update.listed:
        return update.parts
    return {**dict.fromkeys(previous.jobs), **update.parts}


def _job_parts(
    old: JobData | None,
    names: frozenset[str] | None,
    outcomes: Mapping[str, PartOutcome],
    now: float,
    limits: Mapping[str, float],
) -> tuple[Mapping[str, Part], int]:
    """A job's next parts, and how many expired; `old.parts` itself when nothing changed."""
    old_parts: Mapping[str, Part] = old.parts if old is not None else {}
    # Most jobs at most merges: nothing read, nothing gone from the listing, nothing expired.
    same = not outcomes and (names is None or names == old_parts.keys())
    if same and all(now - p.fetched_at <= limits.get(p.tier, 0.0) for p in old_parts.values()):
        return old_parts, 0
    parts: dict[str, Part] = {}
    changed = False
    expired = 0
    for name, part in old_parts.items():
        if names is not None and name not in names:
            changed = True
        elif name in outcomes:
            continue
        elif now - part.fetched_at > limits.get(part.tier, 0.0):
            changed = True
            expired += 1
        else:
            parts[name] = part
    for name, outcome in outcomes.items():
        if names is None or name in names:
            before = old_parts.get(name)
            after, lost = _outcome(before, outcome, now, limits)
            if after is not None:
                parts[name] = after
            expired += lost
            changed = changed or after is not before or lost > 0
    if not changed and old is not None and len(parts) == len(old_parts):
        return old.parts, 0
    return MappingProxyType(parts), expired


def _outcome(
    previous: Part | None, outcome: PartOutcome, now: float, limits: Mapping[str, float]
) -> tuple[Part | None, int]:
    """A part after a read of it (or its failure), and whether it expired (1) or not (0)."""
    if isinstance(outcome, Reading):
        return Part(outcome.samples, now, outcome.tier), 0
    if previous is None:
        return None, 0
    if now - previous.fetched_at > limits.get(previous.tier, 0.0):
        return None, 1
    if previous.failed:
        return previous, 0
    return Part(previous.samples, previous.fetched_at, previous.tier, failed=True), 0
