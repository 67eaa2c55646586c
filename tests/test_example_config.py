"""config/exporter.yaml: it loads, it shows every key of the configuration models, and every
value it shows (beyond the example targets) is the default.

This is what keeps the example current: a key added to a model without its line in the
example fails here, naming the key path.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from exporter.config import DEFAULT_CONFIG_PATH, Settings, load_settings
from exporter.providers.aihc import AihcTarget
from exporter.providers.alaya import AlayaTarget
from tests.conftest import REPO

EXAMPLE = REPO / DEFAULT_CONFIG_PATH
# Values that are examples, not defaults: the targets and what names them.
EXAMPLE_VALUES = {
    "aihc",
    "alaya",
    "aihc[0].name",
    "aihc[0].resource_pool_id",
    "alaya[0].name",
    "alaya[0].jobs",
}


def raw_example() -> dict[str, Any]:
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(model, is_list) when a field holds a model or a list of models."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = nested_model(arg)
            if found[0] is not None:
                return found
        return None, False
    if origin is list:
        (item,) = typing.get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return item, True
        return None, False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def walk(model: type[BaseModel], raw: Any, path: str) -> list[str]:
    """Every problem of `raw` as the example of `model`: missing keys, values not the default."""
    if not isinstance(raw, dict):
        return [f"{path or 'config'}: not a mapping in the example"]
    problems = []
    validated = None if model is Settings else model.model_validate(raw)
    for name, info in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        if name not in raw:
            problems.append(f"{key}: missing from {DEFAULT_CONFIG_PATH}")
            continue
        inner, is_list = nested_model(info.annotation)
        if inner is not None:
            items = raw[name] if is_list else [raw[name]]
            if is_list and not items:
                problems.append(f"{key}: list one example entry, so its keys are shown")
            for index, item in enumerate(items):
                problems += walk(inner, item, f"{key}[{index}]" if is_list else key)
        if info.is_required() or key in EXAMPLE_VALUES or validated is None:
            continue
        default = info.get_default(call_default_factory=True)
        if getattr(validated, name) != default:
            problems.append(f"{key}: shows {raw[name]!r}, but the default is {default!r}")
    return problems


def test_every_key_is_in_the_example_with_its_default() -> None:
    raw = raw_example()
    problems = walk(Settings, raw, "")
    # Settings' own scalars, checked against what the loader makes of the file.
    settings = load_settings(EXAMPLE, {}) if not problems else None
    if settings is not None:
        for name, info in Settings.model_fields.items():
            if name in EXAMPLE_VALUES or nested_model(info.annotation)[0] is not None:
                continue
            if getattr(settings, name) != info.get_default(call_default_factory=True):
                problems.append(f"{name}: shows {raw[name]!r}, not the default")
    assert problems == [], "\n".join(problems)


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TJE_AIHC_ACCESS_KEY_ID", "TJE_AIHC_SECRET_ACCESS_KEY", "TJE_ALAYA_API_KEY"):
        monkeypatch.setenv(name, f"example-{name.lower()}")


def test_the_example_loads_with_credentials_from_the_environment() -> None:
    settings = load_settings(EXAMPLE)
    assert [type(t) for t in settings.targets()] == [AihcTarget, AlayaTarget]
    assert settings.secrets()  # every secret came from the environment, none is inline


def test_the_walk_finds_a_missing_key_and_a_wrong_default(tmp_path: Path) -> None:
    raw = raw_example()
    del raw["aihc"][0]["limits"]["retries"]
    raw["alaya"][0]["pod_details"] = False
    assert walk(Settings, raw, "") == [
        f"aihc[0].limits.retries: missing from {DEFAULT_CONFIG_PATH}",
        "alaya[0].pod_details: shows False, but the default is True",
    ]


def test_the_chart_and_the_image_default_to_the_example() -> None:
    chart_copy = REPO / "deploy" / "helm" / "training-job-exporter" / "files" / "exporter.yaml"
    assert chart_copy.read_text(encoding="utf-8") == EXAMPLE.read_text(encoding="utf-8")
    dockerfile = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert f"COPY {DEFAULT_CONFIG_PATH} /etc/training-job-exporter/exporter.yaml" in dockerfile
    assert "config/exporter.yaml" in (REPO / "README.md").read_text(encoding="utf-8")
