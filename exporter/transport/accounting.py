"""What an attempt leaves behind: its count under a bounded code label, its time, and its
record on the target's status pages (`exporter.status.CallLog`).

The `code` label is a closed set (docs/metrics.md): an upstream that invents a status per
reply must not grow a series per reply. A code outside it is counted as `other`, and its raw
value logged at most once a minute per endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Final

from exporter.logs import LogThrottle, get_logger
from exporter.redaction import redact
from exporter.selfmetrics import SelfMetrics
from exporter.status import CallLog, CallRecord, reading_job
from exporter.transport.iface import ApiResponse, Failure
from exporter.transport.reply import TOO_LARGE

log = get_logger(__name__)

OTHER: Final = "other"
# The statuses told apart, and the transport's own outcomes; a provider adds its documented ones.
CODES: Final = frozenset(
    {"200", "400", "401", "403", "404", "429", "500", "502", "503", "504"}
    | {"timeout", "error", TOO_LARGE}
)


@dataclass(slots=True)
class Outcome:
    """One attempt as it ended: the reply (None when none was read), its code before the
    label's bound, its failure (None: a success, whose parsed value is `value`), and how long
    it took from its admission."""

    code: str
    response: ApiResponse | None = None
    failure: Failure | None = None
    value: Any = None
    took: float | None = None


class Accounting:
    """A target's attempts: counted, timed and recorded, under `provider`/`target` labels."""

    def __init__(
        self,
        provider: str,
        target: str,
        metrics: SelfMetrics,
        codes: frozenset[str],
        throttle: LogThrottle,
    ) -> None:
        self.provider, self.target = provider, target
        self._metrics = metrics
        self._codes = CODES | codes
        self._throttle = throttle
        # The target's recent attempts, for its status pages.
        self.call_log = CallLog()
        # The metric children of this target's attempts, looked up once: `labels()` costs
        # more than the count itself. Bounded by endpoints x codes (a closed set, see CODES).
        self._timers: dict[str, Any] = {}
        self._counters: dict[tuple[str, str], Any] = {}

    def attempt(self, endpoint: str, number: int, outcome: Outcome) -> str:
        """Count, time and record attempt `number` (0 for the first); its code label."""
        if outcome.took is not None:
            histogram = self._timers.get(endpoint)
            if histogram is None:
                family = self._metrics.api_request_duration
                histogram = self._timers[endpoint] = family.labels(self.provider, endpoint)
            histogram.observe(outcome.took)
        code = self._label(endpoint, outcome.code)
        counter = self._counters.get((endpoint, code))
        if counter is None:
            counter = self._metrics.api_requests.labels(self.provider, self.target, endpoint, code)
            self._counters[endpoint, code] = counter
        counter.inc()
        self.call_log.add(self._record(endpoint, number, code, outcome))
        return code

    def dropped(self, endpoint: str) -> None:
        self._metrics.api_calls_dropped.labels(self.provider, self.target, endpoint).inc()

    def retried(self, endpoint: str) -> None:
        self._metrics.api_retries.labels(self.provider, endpoint).inc()

    def log(self, kind: Hashable, emit: Any, event: str, **fields: Any) -> None:
        """`event` at most once a minute per `kind`, naming the target."""
        self._throttle.log(kind, emit, event, provider=self.provider, target=self.target, **fields)

    def _label(self, endpoint: str, code: str) -> str:
        if code in self._codes:
            return code
        self.log(
            ("code", endpoint),
            log.warning,
            "unknown reply code: counted as other",
            endpoint=endpoint,
            status=redact(code, 64),
        )
        return OTHER

    def _record(self, endpoint: str, number: int, code: str, outcome: Outcome) -> CallRecord:
        failure, response = outcome.failure, outcome.response
        return CallRecord(
            at=time.time(),
            endpoint=endpoint,
            job=reading_job.get(),
            code=code,
            attempt=number + 1,
            duration=outcome.took or 0.0,
            size=None if response is None else len(response.body),
            ok=failure is None,
            status=None if response is None else response.status,
            provider_code=None if failure is None else failure.provider_code,
            request_id=None if failure is None else failure.request_id,
            message="" if failure is None else failure.message,
        )
