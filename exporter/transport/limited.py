"""The client every provider gets: the gate, retries, timeouts and accounting.

Each target owns one: an aiohttp transport that allows `max_concurrency` connections, a
semaphore of the same size, and a `Gate` holding the budget of `requests_per_second` (this
replica's share: 1/N with `--shard.count N`), which every attempt, retries included, passes as
it is written: that is what the provider counts. `limits.timeout` runs from that write to the
end of the reply. Every attempt is counted in `training_exporter_api_requests_total` and timed;
retries back off exponentially with full jitter and never run past the call's deadline. 401/403
are never retried. A reply over `max_reply_bytes` fails with code `too_large`, not retried.
The `code` label is a closed set (docs/metrics.md): an upstream that invents a status per reply
must not grow a series per reply.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Final, TypeVar

import aiohttp

from exporter.configkit import Limits
from exporter.logs import LogThrottle, OnChange, get_logger
from exporter.redaction import redact
from exporter.selfmetrics import SelfMetrics
from exporter.status import CallLog, CallRecord, reading_job
from exporter.transport.gate import MAX_PAUSE, Gate
from exporter.transport.http import HttpTransport
from exporter.transport.iface import (
    ApiError,
    ApiResponse,
    CallDropped,
    Classifier,
    Failure,
    PreparedRequest,
    default_classifier,
)
from exporter.transport.reply import TOO_LARGE, InvalidReply, ReplyTooLarge

log = get_logger(__name__)

BACKOFF_BASE = 0.2
BACKOFF_CAP = 10.0
OTHER: Final = "other"
# The statuses told apart, and the transport's own outcomes; a provider adds its documented ones.
CODES: Final = frozenset(
    {"200", "400", "401", "403", "404", "429", "500", "502", "503", "504"}
    | {"timeout", "error", TOO_LARGE}
)

T = TypeVar("T")


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date; None for neither."""
    try:
        return max(0.0, float(value or ""))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value or "").timestamp()
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def _parsed(parse: Callable[[ApiResponse], T], response: ApiResponse) -> T:
    """`parse(response)`, any exception of it an `InvalidReply`: parsing untrusted bytes fails
    that call, never the poll (a deeply nested reply raises RecursionError, not ValueError)."""
    try:
        return parse(response)
    except InvalidReply:
        raise
    except Exception as exc:
        raise InvalidReply(f"{exc.__class__.__name__} while parsing") from None


class LimitedClient:
    """A target's calls over its own HTTP session."""

    def __init__(
        self,
        provider: str,
        target: str,
        limits: Limits,
        metrics: SelfMetrics,
        *,
        classifier: Classifier = default_classifier,
        codes: frozenset[str] = frozenset(),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.provider = provider
        self.target = target
        self.limits = limits
        self._metrics = metrics
        self._classifier = classifier
        self._codes = CODES | codes
        self._sleep = sleep
        self._semaphore = asyncio.Semaphore(limits.max_concurrency)
        self._transport = HttpTransport(limits)
        self.gate = Gate(limits.requests_per_second or None)
        # Whether the credentials were last accepted.
        self._auth_ok = OnChange(True)
        self._throttle = LogThrottle()
        # The target's recent attempts, for its status pages (exporter.status).
        self.calls = CallLog()

    async def close(self) -> None:
        await self._transport.close()

    async def fetch(
        self,
        endpoint: str,
        prepare: Callable[[], PreparedRequest],
        parse: Callable[[ApiResponse], T],
        *,
        deadline: float | None = None,
        classifier: Classifier | None = None,
    ) -> T:
        """Send the request `prepare()` builds and `parse` the reply; a reply `parse` rejects
        (InvalidReply) is a failed, retryable attempt counted as code `error`: a truncated
        body is usually passing.

        `prepare()` runs again for each attempt once it holds its concurrency slot, so a
        signature is made when its request goes out (after at most `max_concurrency` budget
        slots), not when it was queued. `CallDropped` when the first attempt's turn would
        come after `deadline`; when a retry's would, the failure before it is raised.
        """
        classify = classifier or self._classifier
        attempt, last = 0, None
        # When the current attempt was written: timed from there.
        written: list[float] = []

        async def admit() -> None:
            await self.gate.admit(deadline)
            written.append(time.perf_counter())

        while True:
            written.clear()
            response = None
            try:
                async with self._semaphore:
                    response = await self._transport.send(prepare(), admit)
                failure = classify(response)
                code = failure.code if failure and failure.code else str(response.status)
                if failure is None:
                    parsed = _parsed(parse, response)
            except CallDropped:
                self._metrics.api_calls_dropped.labels(self.provider, self.target, endpoint).inc()
                if last is None:
                    raise
                raise self._failed(endpoint, *last, attempt) from None
            except ReplyTooLarge as exc:
                failure, code, response = Failure(False, str(exc)), TOO_LARGE, None
            except TimeoutError:
                failure, code, response = Failure(True, "timed out"), "timeout", None
            except aiohttp.ClientError as exc:
                failure, code, response = Failure(True, exc.__class__.__name__), "error", None
            except InvalidReply as exc:
                failure, code = Failure(True, f"unusable reply: {exc}"), "error"
            code = self._account(endpoint, code, attempt, written, response, failure)
            if failure is None:
                if self._auth_ok.changed(True):
                    self._log(("auth", True), log.info, "credentials accepted again")
                return parsed
            if failure.blocks:
                self.gate.block()
            delay = self._next_delay(endpoint, attempt, failure, response, deadline)
            if delay is None:
                raise self._failed(endpoint, code, failure, attempt + 1)
            self._metrics.api_retries.labels(self.provider, endpoint).inc()
            last = (code, failure)
            attempt += 1
            await self._sleep(delay)

    def _account(
        self,
        endpoint: str,
        code: str,
        attempt: int,
        written: list[float],
        response: ApiResponse | None,
        failure: Failure | None,
    ) -> str:
        """Time the attempt from its write, count it under its code label (`other` for a code
        outside the known ones, whose raw value is logged at most once a minute per endpoint)
        and record it for the status pages; that label."""
        took = time.perf_counter() - written[0] if written else 0.0
        if written:
            self._metrics.api_request_duration.labels(self.provider, endpoint).observe(took)
        if code not in self._codes:
            self._log(
                ("code", endpoint),
                log.warning,
                "unknown reply code: counted as other",
                endpoint=endpoint,
                status=redact(code, 64),
            )
            code = OTHER
        self._metrics.api_requests.labels(self.provider, self.target, endpoint, code).inc()
        self.calls.add(
            CallRecord(
                at=time.time(),
                endpoint=endpoint,
                job=reading_job.get(),
                code=code,
                attempt=attempt + 1,
                duration=took,
                size=None if response is None else len(response.body),
                ok=failure is None,
                status=None if response is None else response.status,
                provider_code=None if failure is None else redact(failure.provider_code, 64),
                request_id=None if failure is None else redact(failure.request_id, 128),
                message="" if failure is None else redact(failure.message),
            )
        )
        return code

    def _next_delay(
        self,
        endpoint: str,
        attempt: int,
        failure: Failure,
        response: ApiResponse | None,
        deadline: float | None,
    ) -> float | None:
        hinted = None
        if response is not None and failure.retryable:
            hinted = retry_after_seconds(response.headers.get("Retry-After"))
            if hinted:
                self._pause(endpoint, hinted)
        if failure.auth or not failure.retryable or attempt >= self.limits.retries:
            return None
        delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
        if hinted is not None:
            delay = max(delay, min(hinted, MAX_PAUSE))
        if deadline is not None and time.monotonic() + delay >= deadline:
            # Better to report this call now than to run past its deadline.
            return None
        return delay

    def _pause(self, endpoint: str, seconds: float) -> None:
        was_open = not self.gate.paused
        paused = self.gate.pause(seconds)
        if was_open and paused >= 1:
            self._log(
                ("paused",),
                log.warning,
                "provider asked to wait (Retry-After): target paused, shown as up 0",
                endpoint=endpoint,
                retry_after=seconds,
                paused_seconds=round(paused, 1),
                max_pause=MAX_PAUSE,
            )

    def _failed(self, endpoint: str, code: str, failure: Failure, attempts: int) -> ApiError:
        """Log a call that failed for good, and the error it raises. Credential trouble is
        logged once per change, not once per call: a target whose list is accepted and whose
        metric calls are refused changes every round, so then once a minute."""
        if failure.auth and self._auth_ok.changed(False):
            self._log(
                ("auth", False),
                log.error,
                "credentials refused: target marked down until they are accepted",
                code=code,
                request_id=failure.request_id,
            )
        self._log(
            (endpoint, code),
            log.debug if failure.auth else log.warning,
            "api request failed",
            endpoint=endpoint,
            code=code,
            provider_code=redact(failure.provider_code, 64) or None,
            request_id=failure.request_id,
            message=redact(failure.message),
            attempts=attempts,
        )
        return ApiError(
            endpoint,
            code,
            failure.message,
            auth=failure.auth,
            request_id=failure.request_id,
            provider_code=failure.provider_code,
        )

    def _log(self, kind: Hashable, emit: Callable[..., Any], event: str, **fields: Any) -> None:
        self._throttle.log(kind, emit, event, provider=self.provider, target=self.target, **fields)
