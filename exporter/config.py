"""Configuration: one YAML file, `TJE_` environment overrides, command-line flags on top.

The keys are the contract in `docs/configuration.md`; `config/exporter.yaml` lists every one
with its default. Every problem is reported as one line naming the key path
(`aihc[0].resource_pool_id: Field required`), never with the value of a secret, and stops the
process with exit code 2 before it listens. The file is read by `exporter.configfile`, which
bounds its size, depth and node count.

Each registered provider (`exporter.providers.registry`) has a top-level key holding a list of
its targets, validated by its own model: the key is the union's discriminator, so one file
names every target's provider without a `provider:` line per target, and a provider added by
an entry point is configured like a built-in one. The pieces targets share (durations, limits,
tiers, bounds) are `exporter.configkit`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, SecretStr, ValidationError, create_model, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from exporter.address import parse_listen_address
from exporter.configfile import ConfigError as ConfigError
from exporter.configfile import read_yaml, validation_problems
from exporter.configkit import (
    MAX_TARGETS,
    Duration,
    Limits,
    PollInterval,
    PositiveDuration,
    StrictModel,
    TargetBase,
    Tiers,
    parse_duration,
    secret_fields,
    user_input,
)
from exporter.providers.registry import registered

__all__ = [
    "ConfigError",
    "Duration",
    "Limits",
    "Settings",
    "StrictModel",
    "TargetBase",
    "Tiers",
    "load_settings",
    "parse_duration",
    "parse_listen_address",
]

DEFAULT_CONFIG_PATH = "config/exporter.yaml"
# 9835, config.md's placeholder, is the NVIDIA GPU exporter's; 9100-9999 is fully allocated and new
# exporters take 10001+ in sequence (README, "Default port").
DEFAULT_PORT = 10050
ENV_PREFIX = "TJE_"

DEFAULT_MAX_CONNECTIONS = 512
DEFAULT_IDLE_TIMEOUT = 75.0


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


class _YamlDictSource(PydanticBaseSettingsSource):
    """The already-parsed YAML file, lowest in precedence."""

    def __init__(self, settings_cls: type[BaseSettings], data: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = dict(data)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self._data


class SettingsBase(BaseSettings):
    """The keys beside the providers' target lists (`Settings` adds one per provider)."""

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

    def targets_of(self, provider: str) -> list[TargetBase]:
        """The targets configured under `provider`'s key."""
        found: list[TargetBase] = getattr(self, provider)
        return found

    def targets(self) -> list[TargetBase]:
        """Every target, in the registry's order of providers, then the file's."""
        return [t for spec in registered() for t in self.targets_of(spec.name)]

    def secrets(self) -> list[str]:
        """Every secret value, for the log redactor."""
        found = []
        for target in self.targets():
            for name in secret_fields(type(target)):
                secret = getattr(target, name)
                if secret is not None:
                    found.append(secret.get_secret_value())
        return [s for s in found if s]


def _with_providers() -> type[SettingsBase]:
    lists: dict[str, Any] = {
        spec.name: (list[spec.target], Field(default=[], max_length=MAX_TARGETS))  # type: ignore[name-defined]
        for spec in registered()
    }
    return create_model("Settings", __base__=SettingsBase, **lists)


if TYPE_CHECKING:
    Settings = SettingsBase
else:
    Settings = _with_providers()


def _resolve_secrets(
    target: TargetBase, provider: str, path: str, env: Mapping[str, str]
) -> tuple[dict[str, SecretStr], list[str]]:
    """Fill each secret from its `*_file` or `TJE_{PROVIDER}_{KEY}` when not given inline."""
    resolved: dict[str, SecretStr] = {}
    problems: list[str] = []
    for name in secret_fields(type(target)):
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
        elif target.needs_secret(name):
            problems.append(f"{path}.{name}: field required (or {name}_file, or {env_name})")
    return resolved, problems


def _check_targets(settings: Settings, env: Mapping[str, str]) -> tuple[Settings, list[str]]:
    problems: list[str] = []
    seen: dict[str, str] = {}
    resolved_lists: dict[str, list[TargetBase]] = {}
    for spec in registered():
        resolved = resolved_lists.setdefault(spec.name, [])
        for index, target in enumerate(settings.targets_of(spec.name)):
            path = f"{spec.name}[{index}]"
            if target.name in seen:
                problems.append(
                    f"{path}.name: duplicate target name, also used by {seen[target.name]}"
                )
            seen.setdefault(target.name, path)
            secrets, target_problems = _resolve_secrets(target, spec.name, path, env)
            problems.extend(target_problems)
            resolved.append(target.completed(secrets))
    if settings.shard.index >= settings.shard.count:
        problems.append("shard.index: must be less than shard.count")
    if not settings.targets() and not settings.demo:
        keys = " or ".join(spec.name for spec in registered())
        problems.append(f"config: no {keys} target configured (use --demo to try the exporter)")
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
        with user_input():
            settings = Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc)) from None
    finally:
        Settings._yaml_data = {}
    settings, problems = _check_targets(settings, os.environ)
    if problems:
        raise ConfigError(problems)
    return settings
