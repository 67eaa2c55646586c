"""Label values past their cap, folded to `other`, and said in the log: at most once a minute
per target and label, with how many were folded since the last line and a few of them.

Upstream chooses these strings (job statuses, pod phases, event types and reasons), so a
value that would grow the label's set past its bound is exported as `other`; which raw values
those were is for the log, redacted and bounded, never for a label.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from exporter.logs import LogThrottle, get_logger
from exporter.redaction import redact

log = get_logger(__name__)

OTHER: Final = "other"
# Raw values a line names (the newest), each cut to RAW_CHARS.
SHOWN: Final = 8
RAW_CHARS: Final = 64


class FoldLog:
    """One target's folded label values, logged once a minute per label."""

    def __init__(
        self, provider: str, target: str, clock: Callable[[], float] | None = None
    ) -> None:
        self.provider, self.target = provider, target
        self._throttle = LogThrottle() if clock is None else LogThrottle(clock=clock)
        # label -> (values folded since its last line, the newest of them)
        self._held: dict[str, tuple[int, deque[str]]] = {}

    def folded(self, label: str, values: Iterable[str], cap: int) -> None:
        """`values` of `label` were exported as `other` (past `cap`)."""
        count, newest = self._held.get(label, (0, deque(maxlen=SHOWN)))
        for value in values:
            count += 1
            if value not in newest:
                newest.append(value)
        if not count:
            return
        if self._throttle.allow(label) is None:
            self._held[label] = (count, newest)
            return
        self._held.pop(label, None)
        log.warning(
            "label values past their cap exported as other",
            provider=self.provider,
            target=self.target,
            label=label,
            cap=cap,
            folded=count,
            values=[redact(v, RAW_CHARS) for v in newest],
        )
