"""The building blocks of a target's configuration, below the providers that define targets.

`exporter.config` assembles the whole file from these and from each registered provider's target
model (`exporter.providers.registry`); the transport reads `Limits`, the web config `Duration`.

Bounds that protect the provider and the process: `poll_interval` is at least 1 s (at 1 ms a
target makes 9,096 calls in 5 s); the request budget is switched off only by spelling
`requests_per_second: unlimited`; lists are capped (`MAX_QUEUES` and friends) so a file cannot
make one target poll 700,000 queues.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, ClassVar, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
)
from pydantic.fields import FieldInfo

# List bounds: each queue, job and pod costs calls every poll, and a 1 MiB file could list
# ~100,000 of them.
MAX_TARGETS = 100
MAX_QUEUES = 1_000
MAX_STATUSES = 64
MIN_POLL_INTERVAL = 1.0
UNLIMITED = "unlimited"
# A refresh tier (exporter/work/tiers.py).
TierName = Literal["fast", "medium", "slow"]

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: object) -> float:
    """`30s`, `5m`, `1h30m`, `250ms` or plain seconds, as seconds."""
    if isinstance(value, bool):
        raise ValueError("not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            if not text or _DURATION_PART.sub("", text):
                raise ValueError(
                    "not a duration: use a number of seconds or units like 30s, 5m, 1h"
                ) from None
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))
    else:
        raise ValueError("not a duration")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError("duration must be a finite number of seconds >= 0")
    return seconds


# Set while load_settings validates what a user wrote (file, environment, flags): only there are
# a `poll_interval` under 1s and `requests_per_second: 0` refused. Code (tests with fast
# polls, the demo) may still use both; 0 there means no budget.
_FROM_USER: ContextVar[bool] = ContextVar("tje_config_from_user", default=False)


def _poll_floor(seconds: float) -> float:
    if _FROM_USER.get() and seconds < MIN_POLL_INTERVAL:
        raise ValueError("must be at least 1s: every poll calls the provider")
    return seconds


@contextmanager
def user_input() -> Iterator[None]:
    token = _FROM_USER.set(True)
    try:
        yield
    finally:
        _FROM_USER.reset(token)


def _request_rate(value: object) -> object:
    """`unlimited` switches the budget off (stored as 0); a written 0 is refused."""
    if isinstance(value, str) and value.strip().lower() == UNLIMITED:
        return 0.0
    if _FROM_USER.get() and not isinstance(value, bool):
        try:
            zero = float(value) == 0  # type: ignore[arg-type]
        except (TypeError, ValueError):
            zero = False
        if zero:
            raise ValueError(
                "0 would switch the request budget off: write `unlimited` for that, "
                "or a rate above 0"
            )
    return value


Duration = Annotated[float, BeforeValidator(parse_duration)]
PositiveDuration = Annotated[Duration, Field(gt=0)]
PollInterval = Annotated[Duration, AfterValidator(_poll_floor)]
RequestRate = Annotated[float, BeforeValidator(_request_rate)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Limits(StrictModel):
    max_concurrency: int = Field(default=8, ge=1, le=1024)
    # `unlimited` (0 in code) turns the request-rate budget off.
    requests_per_second: RequestRate = Field(default=10.0, ge=0)
    timeout: PositiveDuration = 10.0
    retries: int = Field(default=3, ge=0, le=20)
    # Bytes of one reply (decompressed); a longer one fails its call with code too_large. The
    # largest replies the simulator makes are 1.16 MB (a DescribeJobs page of 1,000 jobs; the
    # documented job items are 1.3-1.6 KB, so 1.6 MB) and 52 KB per pod for DescribeJobMetrics
    # at first_window_steps 1000 (5 steps by default: 2.3 KB for 8 pods): 8 MiB is 5x the
    # largest page. Parsed JSON costs ~25x its text (a 30 MB reply took RSS from 53 to
    # 825 MiB), so max_concurrency x this bounds what replies in flight can cost.
    max_reply_bytes: int = Field(default=8 * 1024 * 1024, ge=64 * 1024, le=1024**3)


class Tiers(StrictModel):
    """Refresh tiers (exporter/work/tiers.py): fast runs every poll_interval, with the job list."""

    # null: 5 and 15 x the target's poll_interval.
    medium: PositiveDuration | None = None
    slow: PositiveDuration | None = None
    # item (a metric type, pods, events, basic) -> the tier it moves to from its default.
    move: dict[str, TierName] = {}


class TargetBase(StrictModel):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    limits: Limits = Limits()
    # Per target, so one slow pool can be polled less often; null: the global poll_interval.
    poll_interval: PollInterval | None = None
    tiers: Tiers = Tiers()
    max_series: int = Field(default=200_000, ge=1)
    # Jobs exported (and read) at most, chosen before any per-job call: those exported already
    # first, then running ones. Uncapped, 50,000 listed jobs make 1.2 M calls and 3.1 GiB at once.
    max_jobs: int = Field(default=5_000, ge=1, le=100_000)

    # The provider's name (`ProviderSpec.name`): its key in the file and its `provider` label.
    provider: ClassVar[str] = ""
    # Every item a target of this provider can read (one call each): what `tiers.move` names.
    items: ClassVar[tuple[str, ...]] = ()
    # Each item's tier before `tiers.move` (exporter/work/tiers.py).
    default_tiers: ClassVar[Mapping[str, TierName]] = {}
    # Items that show a unit's state (phases, restarts): read first among reads due at once.
    state_items: ClassVar[frozenset[str]] = frozenset()

    @field_validator("tiers")
    @classmethod
    def _known_items(cls, value: Tiers) -> Tiers:
        unknown = sorted(set(value.move) - set(cls.items))
        if unknown:
            raise ValueError(f"move: unknown item {unknown[0]!r} (items: {', '.join(cls.items)})")
        return value

    # Every provider's API is one base URL, declared with its default by the provider's model.
    @field_validator("endpoint", check_fields=False)
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_http_url(value)

    def at_rate(self, requests_per_second: float) -> Self:
        """This target with another request budget (a shard's share, a backfill's own)."""
        limits = self.limits.model_copy(update={"requests_per_second": requests_per_second})
        return self.model_copy(update={"limits": limits})

    def read_items(self) -> tuple[str, ...]:
        """The items this target reads per unit, as its options choose them from `items`."""
        return self.items

    def needs_secret(self, name: str) -> bool:
        """Whether the secret field `name` must be given (some only serve an option)."""
        return True

    def completed(self, secrets: Mapping[str, SecretStr]) -> Self:
        """This target with its secrets filled in from files or the environment."""
        return self.model_copy(update=dict(secrets))


def secret_fields(model: type[BaseModel]) -> list[str]:
    return [
        name
        for name, info in model.model_fields.items()
        if _is_secret(info) and f"{name}_file" in model.model_fields
    ]


def _is_secret(info: FieldInfo) -> bool:
    return "SecretStr" in repr(info.annotation)


def check_http_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")
