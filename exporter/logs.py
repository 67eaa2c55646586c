"""structlog set-up: JSON by default, console on request, and one redactor for every secret.

The redactor runs last before rendering, so no call site can leak a secret by accident: it
masks values under secret-looking keys, any configured secret value wherever it appears, and
the shapes of credentials in free text (`bce-auth-v1/...` signatures, `Bearer ...` tokens).
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Hashable, Iterable, MutableMapping
from typing import Any, Generic, TypeVar

import structlog

REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"(secret|password|passwd|token|api[_-]?key|access[_-]?key|authorization|credential|"
    r"signature|cookie|imageconfig)",
    re.IGNORECASE,
)
_SECRET_SHAPES = (
    re.compile(r"bce-auth-v1/[^\s\"',]+"),
    re.compile(r"(?i)\bBearer\s+[^\s\"',]+"),
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)[^\"',}\s]+"),
)


class SecretRedactor:
    """A structlog processor that masks secrets in every key and value of an event."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        # Longest first so a secret that contains another is masked whole.
        self._secrets = sorted({*self._secrets, *(s for s in secrets if len(s) >= 4)}, key=len)[
            ::-1
        ]

    def redact_text(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        for shape in _SECRET_SHAPES:
            if shape.groups:
                text = shape.sub(lambda m: m.group(1) + REDACTED, text)
            else:
                text = shape.sub(REDACTED, text)
        return text

    def redact(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            return {
                k: REDACTED if _SECRET_KEY.search(str(k)) else self.redact(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple | set):
            return [self.redact(v) for v in value]
        if isinstance(value, int | float | bool) or value is None:
            return value
        return self.redact_text(str(value))

    def __call__(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key in list(event_dict):
            if _SECRET_KEY.search(key):
                event_dict[key] = REDACTED
            else:
                event_dict[key] = self.redact(event_dict[key])
        return event_dict


redactor = SecretRedactor()


def configure_logging(level: str = "info", fmt: str = "json", stream: Any = None) -> None:
    """Set up structlog (and route stdlib logging, e.g. aiohttp's, through the same redactor)."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    renderer: Any = (
        structlog.processors.JSONRenderer(ensure_ascii=False)
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    structlog.configure(
        processors=[*shared, redactor, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    root.handlers[:] = [_stdlib_handler(shared, renderer, stream or sys.stderr)]
    # Libraries' own debug output (aiohttp, asyncio) is noise even at --log.level=debug.
    root.setLevel(max(numeric, logging.INFO))
    # The access log of every scrape is noise at info level.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def _stdlib_handler(shared: list[Any], renderer: Any, stream: Any) -> logging.Handler:
    """A stdlib handler that renders records as structlog's lines are rendered, redacted alike
    (a throttled line's `repeated` count kept)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                redactor,
                renderer,
            ],
            foreign_pre_chain=[
                structlog.stdlib.add_logger_name,
                structlog.stdlib.ExtraAdder(allow=["repeated"]),
                *shared,
            ],
        )
    )
    return handler


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)


class LogThrottle:
    """One line per kind per `interval`: the first at once, then one with the count of those
    held back (`repeated`). A failing upstream answers every call the same way, and a
    connection flood makes asyncio write an accept() traceback per refused connection: one
    line says what the rest would."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        # kind -> (when last logged, lines held back since)
        self._seen: dict[Hashable, tuple[float, int]] = {}

    def allow(self, kind: Hashable) -> int | None:
        """None: hold this line back (it is counted); else how many were held back before it."""
        now = self._clock()
        last = self._seen.get(kind)
        if last is not None and now - last[0] < self._interval:
            self._seen[kind] = (last[0], last[1] + 1)
            return None
        self._seen[kind] = (now, 0)
        if len(self._seen) > 1024:
            # Kinds come from upstream codes: keep the table bounded whatever they are.
            self._seen = {kind: self._seen[kind]}
        return last[1] if last is not None else 0

    def log(self, kind: Hashable, emit: Callable[..., Any], event: str, **fields: Any) -> None:
        held = self.allow(kind)
        if held is None:
            return
        if held:
            fields["repeated"] = held
        emit(event, **fields)


S = TypeVar("S")


class OnChange(Generic[S]):
    """The last state seen of each key, so a condition is logged when it changes and not on
    every poll that finds it again: a failing list or refused credentials is one line when it
    starts and one when it ends, whatever the poll interval. Keys are a target's own few
    (collections, endpoints): configuration bounds them, not upstream."""

    def __init__(self, initial: S) -> None:
        self._initial = initial
        self._last: dict[Hashable, S] = {}

    def changed(self, state: S, key: Hashable = None) -> bool:
        """Record `state` for `key`; True when it differs from the one recorded before."""
        if self._last.get(key, self._initial) == state:
            return False
        self._last[key] = state
        return True

    def last(self, key: Hashable = None) -> S:
        return self._last.get(key, self._initial)
