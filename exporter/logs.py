"""structlog set-up: JSON by default, console on request, every line through the redactor.

The redactor (`exporter.redaction`, the one provider text passes too) runs last before
rendering, so no call site can leak a secret by accident: it masks values under
secret-looking keys, any configured secret value wherever it appears, and the shapes of
credentials in free text (`bce-auth-v1/...` signatures, `Bearer ...` tokens).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from exporter.redaction import redactor

# structlog is imported where it is used: `import structlog` loads its console renderer and
# with it rich, where installed, which the command line's exit 2 and --help and the
# throttles below do without.


def configure_logging(level: str = "info", fmt: str = "json", stream: Any = None) -> None:
    """Set up structlog (and route stdlib logging, e.g. aiohttp's, through the same redactor)."""
    import structlog

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
    import structlog

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
    import structlog

    return structlog.get_logger(name)


# The longest a condition that goes on is left unsaid: a line an hour at least, however long.
LONGEST_QUIET = 3600.0
# A kind back after this many intervals away is a new condition: said at once.
NEW_AFTER = 10


class LogThrottle:
    """One line per kind, then fewer and fewer while the kind goes on: the first at once, the
    next `interval` later, then twice as long each time (up to LONGEST_QUIET), each with the
    count of those held back (`repeated`). A kind back after NEW_AFTER intervals away starts
    over, said at once. A failing upstream answers every call the same way, and a connection
    flood makes asyncio write an accept() traceback per refused connection: one line says what
    the rest would."""

    def __init__(self, interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        # kind -> (when last said, lines held back since, the interval until the next, when
        # last seen)
        self._seen: dict[Hashable, tuple[float, int, float, float]] = {}

    def allow(self, kind: Hashable) -> int | None:
        """None: hold this line back (it is counted); else how many were held back before it."""
        now = self._clock()
        last = self._seen.get(kind)
        if last is None or now - last[3] >= NEW_AFTER * self._interval:
            interval = self._interval
        elif now - last[0] < last[2]:
            self._seen[kind] = (last[0], last[1] + 1, last[2], now)
            return None
        else:
            interval = min(2 * last[2], LONGEST_QUIET)
        self._seen[kind] = (now, 0, interval, now)
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
