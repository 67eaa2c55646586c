"""Configuration: one YAML file, `TJE_` environment overrides, command-line flags on top.

The keys are the contract in `docs/configuration.md`; `config/exporter.yaml` lists every one
with its default. Every problem is reported as one line naming the key path
(`aihc[0].resource_pool_id: Field required`), never with the value of a secret, and stops the
process with exit code 2 before it listens. The file is read by `exporter.configfile`, which
bounds its size, depth and node count.

Bounds that protect the provider and the process: `poll_interval` is at least 1 s (1 ms was
accepted and made 9,096 calls in 5 s); the request budget is switched off only by spelling
`requests_per_second: unlimited`; lists are capped (`MAX_QUEUES` and friends) so a file cannot
make one target poll 700,000 queues.
"""

from __future__ import annotations

import math
import os
import re
import string
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from exporter.configfile import ConfigError as ConfigError
from exporter.configfile import read_yaml, validation_problems

DEFAULT_CONFIG_PATH = "config/exporter.yaml"
# 9835, config.md's placeholder, is the NVIDIA GPU exporter's; 9100-9999 is fully allocated and new
# exporters take 10001+ in sequence (README, "Default port").
DEFAULT_PORT = 10050
ENV_PREFIX = "TJE_"

AIHC_METRIC_TYPES: tuple[str, ...] = (
    "GpuUsage",
    "GpuMemoryUsage",
    "CpuUsage",
    "MemoryUsage",
    "CpuTime",
    "MemoryAllocation",
    "DiskReadRate",
    "DiskWriteRate",
    "RDMASendDataRate",
    "RDMARecvDataRate",
    "PCIESendDataRate",
    "PCIERecvDataRate",
    "NVLinkSendDataRate",
    "NVLinkRecvDataRate",
    "GpuTemperature",
    "GpuPowerUsage",
    "GpuPipeTensorUsage",
    "RDMAHealth",
    "RDMASendErrorRate",
    "RDMARecvErrorRate",
    "RDMASendPacketsRate",
    "RDMARecvPacketsRate",
)
ALAYA_TYPES: tuple[str, ...] = ("gpu", "vram", "cpu", "memory")
# What each provider reads per job, one call each: the items refresh tiers are made of.
AIHC_ITEMS: tuple[str, ...] = (*AIHC_METRIC_TYPES, "pods", "events")
ALAYA_ITEMS: tuple[str, ...] = (*ALAYA_TYPES, "basic")
TIER_NAMES: tuple[str, ...] = ("fast", "medium", "slow")
ALAYA_PERIODS: tuple[str, ...] = ("15m", "1h", "6h", "24h", "3d", "7d", "30d")

# List bounds: each queue, job and pod costs calls every poll, and a 1 MiB file could list
# ~100,000 of them.
MAX_TARGETS = 100
MAX_QUEUES = 1_000
MAX_STATUSES = 64
MAX_JOBS = 10_000
MAX_PODS_PER_JOB = 1_024
MIN_POLL_INTERVAL = 1.0
UNLIMITED = "unlimited"
DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_IDLE_TIMEOUT = 75.0

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
def _user_input() -> Iterator[None]:
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


class WebConfig(StrictModel):
    listen_address: str = f"0.0.0.0:{DEFAULT_PORT}"
    telemetry_path: str = "/metrics"
    config_file: Path | None = None
    # POST /-/reload, as Prometheus' --web.enable-lifecycle; SIGHUP reloads either way.
    enable_lifecycle: bool = False
    # Open connections kept (clipped to half the open-file limit); past it the longest idle
    # one is closed, or, when every one is busy, the new one gets 503.
    max_connections: int = Field(default=DEFAULT_MAX_CONNECTIONS, ge=1, le=65_536)
    # A connection with no request in flight for this long is closed.
    idle_timeout: PositiveDuration = DEFAULT_IDLE_TIMEOUT

    @field_validator("listen_address")
    @classmethod
    def _valid_address(cls, value: str) -> str:
        parse_listen_address(value)
        return value

    @field_validator("telemetry_path")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        if not value.startswith("/") or value in ("/", "/-/healthy", "/-/ready"):
            raise ValueError("must start with / and not be /, /-/healthy or /-/ready")
        return value


class LogConfig(StrictModel):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] = "json"

    @field_validator("level", mode="before")
    @classmethod
    def _lower(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value


class ShardConfig(StrictModel):
    index: int = Field(default=0, ge=0)
    count: int = Field(default=1, ge=1)


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
    move: dict[str, Literal["fast", "medium", "slow"]] = {}


class TargetBase(StrictModel):
    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    limits: Limits = Limits()
    # Per target, so one slow pool can be polled less often; null: the global poll_interval.
    poll_interval: PollInterval | None = None
    tiers: Tiers = Tiers()
    max_series: int = Field(default=200_000, ge=1)
    # Jobs exported (and read) at most, chosen before any per-job call: those exported already
    # first, then running ones. 50,000 listed jobs once made 1.2 M calls and 3.1 GiB at once.
    max_jobs: int = Field(default=5_000, ge=1, le=100_000)

    _items: ClassVar[tuple[str, ...]] = ()

    @field_validator("tiers")
    @classmethod
    def _known_items(cls, value: Tiers) -> Tiers:
        unknown = sorted(set(value.move) - set(cls._items))
        if unknown:
            raise ValueError(f"move: unknown item {unknown[0]!r} (items: {', '.join(cls._items)})")
        return value


def _secret_fields(model: type[BaseModel]) -> list[str]:
    return [
        name
        for name, info in model.model_fields.items()
        if _is_secret(info) and f"{name}_file" in model.model_fields
    ]


def _is_secret(info: FieldInfo) -> bool:
    return "SecretStr" in repr(info.annotation)


class AihcTarget(TargetBase):
    _items: ClassVar[tuple[str, ...]] = AIHC_ITEMS
    endpoint: str = "https://aihc.bj.baidubce.com"
    access_key_id: SecretStr | None = None
    access_key_id_file: Path | None = None
    secret_access_key: SecretStr | None = None
    secret_access_key_file: Path | None = None
    resource_pool_id: str = Field(min_length=1)
    queues: list[str] = Field(default=[], max_length=MAX_QUEUES)
    metric_types: list[Literal[AIHC_METRIC_TYPES]] = Field(  # type: ignore[valid-type]
        default=[], max_length=len(AIHC_METRIC_TYPES)
    )
    metric_statuses: list[str] = Field(default=["Running"], max_length=MAX_STATUSES)
    usage_unit: Literal["percent", "ratio"] = "percent"
    events: bool = True
    page_size: int = Field(default=100, ge=1, le=1000)
    # The first DescribeJobMetrics of a pod asks this many timeSteps back.
    time_step: PositiveDuration = 60.0
    first_window_steps: int = Field(default=5, ge=1, le=1000)

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_http_url(value)

    @property
    def effective_metric_types(self) -> tuple[str, ...]:
        return tuple(self.metric_types) or AIHC_METRIC_TYPES


def _int_as_text(value: object) -> object:
    # Alaya's aidcId is a number in the list's records; YAML users write either.
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


POD_PATTERN_FIELDS = frozenset({"name", "id", "index"})


def _check_pod_pattern(value: str) -> str:
    try:
        parsed = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(value)]
    except ValueError:
        raise ValueError("unbalanced { or }: write {{ and }} for literal braces") from None
    fields = [f for f, spec, conv in parsed if f is not None]
    if any(f not in POD_PATTERN_FIELDS for f in fields) or any(s or c for _, s, c in parsed):
        raise ValueError("placeholders are {name}, {id} and {index}, as in {name}-worker-{index}")
    if value and "index" not in fields:
        raise ValueError("needs {index}, or every worker of a job gets the same pod name")
    return value


class AlayaJob(StrictModel):
    id: str = Field(min_length=1)
    pods: list[str] = Field(min_length=1, max_length=MAX_PODS_PER_JOB)


class AlayaTarget(TargetBase):
    _items: ClassVar[tuple[str, ...]] = ALAYA_ITEMS
    endpoint: str = "https://api.alayanew.com"
    api_key: SecretStr | None = None
    api_key_file: Path | None = None
    types: list[Literal[ALAYA_TYPES]] = Field(  # type: ignore[valid-type]
        default=list(ALAYA_TYPES), max_length=len(ALAYA_TYPES)
    )
    # Either a preset `period`, or a `lookback` sent as startTime/endTime.
    period: Literal[ALAYA_PERIODS] | None = "15m"  # type: ignore[valid-type]
    lookback: PositiveDuration | None = None
    time_zone: str = "Asia/Shanghai"
    pod_details: bool = True
    jobs: list[AlayaJob] = Field(default=[], max_length=MAX_JOBS)
    # A YAML or JSON file `{jobs: [...]}`, re-read when it changes; its jobs join `jobs`.
    jobs_file: Path | None = None
    # `list`: the jobs come from Alaya's (undocumented) job list; `jobs` / `jobs_file` then
    # only name the pods of the jobs they list.
    discovery: Literal["configured", "list"] = "configured"
    # The job list's access key pair (not the API key): required only with `discovery: list`.
    access_key_id: SecretStr | None = None
    access_key_id_file: Path | None = None
    secret_access_key: SecretStr | None = None
    secret_access_key_file: Path | None = None
    # Listed jobs exported, and those whose pods are polled; matched without case. []: all.
    list_statuses: list[str] = Field(default=["Running"], max_length=MAX_STATUSES)
    metric_statuses: list[str] = Field(default=["Running"], max_length=MAX_STATUSES)
    aidc_id: Annotated[str, BeforeValidator(_int_as_text)] | None = None
    # Pods of a listed job no jobs entry names: `{name}`, `{id}`, `{index}` (0..workerCount-1).
    pod_pattern: str = Field(default="", max_length=253)
    list_page_size: int = Field(default=100, ge=1, le=1000)
    list_max_pages: int = Field(default=50, ge=1, le=1000)

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _check_http_url(value)

    @field_validator("types")
    @classmethod
    def _unique_types(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(value))

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError("unknown time zone: use an IANA name like Asia/Shanghai") from None
        return value

    @model_validator(mode="after")
    def _has_window(self) -> AlayaTarget:
        if self.period is None and self.lookback is None:
            raise ValueError("set period (15m, 1h, 6h, 24h, 3d, 7d, 30d) or lookback")
        return self

    @field_validator("pod_pattern")
    @classmethod
    def _known_placeholders(cls, value: str) -> str:
        return _check_pod_pattern(value)

    def needs_secret(self, name: str) -> bool:
        return name == "api_key" or self.discovery == "list"


def _check_http_url(value: str) -> str:
    if not re.match(r"^https?://[^/\s]+", value):
        raise ValueError("must be an http:// or https:// URL")
    return value.rstrip("/")


class _YamlDictSource(PydanticBaseSettingsSource):
    """The already-parsed YAML file, lowest in precedence."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = dict(data)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    web: WebConfig = WebConfig()
    poll_interval: PollInterval = 60.0
    # null: 3 x poll_interval. How long a part's last good series outlive its last read, for
    # the fast tier; slower tiers' bounds scale with their intervals.
    stale_after: PositiveDuration | None = None
    log: LogConfig = LogConfig()
    shard: ShardConfig = ShardConfig()
    aihc: list[AihcTarget] = Field(default=[], max_length=MAX_TARGETS)
    alaya: list[AlayaTarget] = Field(default=[], max_length=MAX_TARGETS)
    demo: bool = False

    _yaml_data: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _YamlDictSource(settings_cls, cls._yaml_data))

    @property
    def effective_stale_after(self) -> float:
        return self.stale_after if self.stale_after is not None else 3 * self.poll_interval

    def targets(self) -> list[AihcTarget | AlayaTarget]:
        return [*self.aihc, *self.alaya]

    def secrets(self) -> list[str]:
        """Every secret value, for the log redactor."""
        found = []
        for target in self.targets():
            for name in _secret_fields(type(target)):
                secret = getattr(target, name)
                if secret is not None:
                    found.append(secret.get_secret_value())
        return [s for s in found if s]


def parse_listen_address(value: str) -> tuple[str, int]:
    """`host:port`, `[v6]:port` or `:port` (all interfaces)."""
    match = re.fullmatch(r"(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]*)):(?P<port>\d{1,5})", value)
    if not match or int(match["port"]) > 65535:
        raise ValueError("must be host:port, [ipv6]:port or :port")
    host = match["v6"] or match["host"] or "0.0.0.0"
    return host, int(match["port"])


def _resolve_secrets(
    target: AihcTarget | AlayaTarget, path: str, env: Mapping[str, str]
) -> tuple[dict[str, SecretStr], list[str]]:
    """Fill each secret from its `*_file` or `TJE_{PROVIDER}_{KEY}` when not given inline."""
    provider = "aihc" if isinstance(target, AihcTarget) else "alaya"
    resolved: dict[str, SecretStr] = {}
    problems: list[str] = []
    for name in _secret_fields(type(target)):
        if getattr(target, name) is not None:
            continue
        file_path: Path | None = getattr(target, f"{name}_file")
        env_name = f"{ENV_PREFIX}{provider.upper()}_{name.upper()}"
        if file_path is not None:
            try:
                value = file_path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                problems.append(f"{path}.{name}_file: cannot read {file_path}: {exc.strerror}")
                continue
            except UnicodeDecodeError:
                problems.append(f"{path}.{name}_file: {file_path} is not UTF-8 text")
                continue
            if not value:
                problems.append(f"{path}.{name}_file: {file_path} is empty")
                continue
            resolved[name] = SecretStr(value)
        elif env.get(env_name):
            resolved[name] = SecretStr(env[env_name])
        elif not isinstance(target, AlayaTarget) or target.needs_secret(name):
            problems.append(f"{path}.{name}: field required (or {name}_file, or {env_name})")
    return resolved, problems


def _check_targets(settings: Settings, env: Mapping[str, str]) -> tuple[Settings, list[str]]:
    problems: list[str] = []
    seen: dict[str, str] = {}
    resolved_lists: dict[str, list[Any]] = {"aihc": [], "alaya": []}
    for provider in ("aihc", "alaya"):
        for index, target in enumerate(getattr(settings, provider)):
            path = f"{provider}[{index}]"
            if target.name in seen:
                problems.append(
                    f"{path}.name: duplicate target name, also used by {seen[target.name]}"
                )
            seen.setdefault(target.name, path)
            secrets, target_problems = _resolve_secrets(target, path, env)
            problems.extend(target_problems)
            if isinstance(target, AlayaTarget) and target.lookback is not None:
                secrets_or_none: dict[str, Any] = {**secrets, "period": None}
            else:
                secrets_or_none = dict(secrets)
            resolved_lists[provider].append(target.model_copy(update=secrets_or_none))
    if settings.shard.index >= settings.shard.count:
        problems.append("shard.index: must be less than shard.count")
    if not settings.targets() and not settings.demo:
        problems.append(
            "config: no aihc or alaya target configured (use --demo to try the exporter)"
        )
    return settings.model_copy(update=resolved_lists), problems


def load_settings(
    config_path: str | Path | None, overrides: Mapping[str, Any] | None = None
) -> Settings:
    """Read, merge and check the configuration; raise ConfigError listing every problem.

    Precedence: `overrides` (the command-line flags) over `TJE_` environment variables over
    the YAML file. `config_path` None means the default path; in demo mode that file is not
    read (the demo brings its own targets, and config/exporter.yaml's example targets would
    ask for credentials).
    """
    overrides = dict(overrides or {})
    path = Path(config_path) if config_path is not None else Path(DEFAULT_CONFIG_PATH)
    if config_path is None and overrides.get("demo"):
        data: dict[str, Any] = {}
    else:
        data = read_yaml(path)
    try:
        Settings._yaml_data = data
        with _user_input():
            settings = Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc)) from None
    finally:
        Settings._yaml_data = {}
    settings, problems = _check_targets(settings, os.environ)
    if problems:
        raise ConfigError(problems)
    return settings
