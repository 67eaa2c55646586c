"""Reading a local YAML file into a mapping, bounded, and turning errors into one-line problems.

Shared by the configuration (`exporter.config`) and the web config (`exporter.web.config`), so
both refuse the same inputs the same way: every failure is a `ConfigError` whose lines name the
file or the key path, never a traceback. Found on loopback before the bounds:
`--config /dev/zero` read 1.5 GiB in 3.4 s; a file nested 50,000 levels deep died in a
2,999-line RecursionError; a 10 MB file of 700,000 queues took 23 s to parse, 3.6 GiB and 95 s
to listen. Now:

- at most `MAX_BYTES` (1 MiB) are read: a config with 10,000 Alaya jobs inline is ~0.8 MiB,
  and libyaml parses a full 1 MiB in ~0.3 s;
- one pass over the parser's events (no recursion) refuses nesting deeper than `MAX_DEPTH` and
  more than `MAX_NODES` values with aliases expanded (a "billion laughs" file is 451 bytes;
  10,000 Alaya jobs of 8 pods are 130,000 values), so the recursive composer and pydantic only
  ever see small trees: 300,000 empty lists took 4.4 s to load and 270 MB;
- two equal keys in one mapping are an error, as in Go's strict decoder (PyYAML keeps the last);
- at most `MAX_PROBLEMS` validation problems are listed, then how many more.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 200_000
MAX_PROBLEMS = 20

# libyaml's parser where PyYAML was built with it (the wheels are), else the pure-Python one.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ConfigError(Exception):
    """A configuration that cannot be used; `problems` holds one line per problem."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class _UniqueKeyLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """PyYAML keeps the last of two equal keys; Go's strict decoder refuses them, and so do we."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                continue
            if key_node.value in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                )
            seen.add(key_node.value)
        return super().construct_mapping(node, deep)  # type: ignore[no-any-return]


def read_yaml(path: Path, prefix: str = "config", max_bytes: int = MAX_BYTES) -> dict[str, Any]:
    """The file's top-level mapping ({} for an empty file); ConfigError with `prefix: ...`."""
    data = read_yaml_value(path, prefix, max_bytes)
    if data is None:
        return {}
    if not isinstance(data, dict):
        problem = f"{path} must hold a mapping of keys, not a {type_name(data)}"
        raise ConfigError([f"{prefix}: {problem}"])
    return data


def type_name(data: object) -> str:
    return type(data).__name__


def read_yaml_value(path: Path, prefix: str = "config", max_bytes: int = MAX_BYTES) -> Any:
    """The file's top-level value, whatever its type (None for an empty file); ConfigError
    with `prefix: ...`."""

    def fail(problem: str) -> ConfigError:
        return ConfigError([f"{prefix}: {problem}"])

    try:
        with path.open("rb") as file:
            raw = file.read(max_bytes + 1)
    except FileNotFoundError:
        raise fail(f"file not found: {path}") from None
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror or exc.__class__.__name__}") from None
    if len(raw) > max_bytes:
        raise fail(f"{path} is larger than {max_bytes // 1024} KiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(f"{path} is not UTF-8 text") from None
    try:
        problem = _shape_problem(text)
        data = None if problem else yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        reason = getattr(exc, "problem", None) or "syntax error"
        raise fail(f"invalid YAML in {path}{where}: {reason}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        # e.g. an integer of more than 4,300 digits, which int() refuses.
        raise fail(f"invalid YAML in {path}: {_first_line(exc)}") from None
    if problem:
        raise fail(f"{path} {problem}")
    return data


def _shape_problem(text: str) -> str | None:
    """Why the document is too deep or too big once aliases are expanded, or None."""
    depth = 0
    # Per open collection, its expanded node count so far; per anchor, its subtree's.
    open_counts: list[int] = [0]
    anchors: dict[str, int] = {}
    open_anchors: list[str | None] = []
    for event in _events(text):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return f"nests deeper than {MAX_DEPTH} levels"
            open_counts.append(1)
            open_anchors.append(event.anchor)
            continue
        if isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            size = open_counts.pop()
            anchor = open_anchors.pop()
            if anchor is not None:
                anchors[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor is not None:
                anchors[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            size = anchors.get(event.anchor or "", 1)
        else:
            continue
        open_counts[-1] += size
        if sum(open_counts) > MAX_NODES:
            return f"holds more than {MAX_NODES:,} values once its aliases are expanded"
    return None


def _events(text: str) -> Iterator[yaml.Event]:
    loader = _BaseLoader(text)
    try:
        while loader.check_event():
            yield loader.get_event()  # type: ignore[no-untyped-call]
    finally:
        loader.dispose()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else exc.__class__.__name__


def format_loc(loc: Iterable[int | str]) -> str:
    """('aihc', 0, 'resource_pool_id') -> 'aihc[0].resource_pool_id'."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif text:
            text += f".{part}"
        else:
            text = str(part)
    return text or "config"


def describe(error: Mapping[str, Any]) -> str:
    """One pydantic error as `key.path: message`."""
    loc = [p for p in error["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        message = "unknown key"
    return f"{format_loc(loc)}: {message.removeprefix('Value error, ')}"


def validation_problems(exc: ValidationError, prefix: str = "") -> list[str]:
    """Every error of `exc` as one line (at most MAX_PROBLEMS, then how many more)."""
    errors = exc.errors(include_input=False)
    lines = [f"{prefix}{describe(error)}" for error in errors[:MAX_PROBLEMS]]
    if len(errors) > MAX_PROBLEMS:
        lines.append(f"{prefix or 'config: '}{len(errors) - MAX_PROBLEMS} more problems not listed")
    return lines
