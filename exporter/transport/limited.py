"""The client every provider gets: the gate, retries, timeouts and accounting.

Each target owns one: a transport that allows `max_concurrency` connections, a
semaphore of the same size, and a `Gate` holding the budget of `requests_per_second` (this
replica's share: 1/N with `--shard.count N`). Every attempt, retries included, goes through
the same named steps:

- admit: the gate lets it go now, or drops it unsent (`CallDropped`, its turn would come after
  its deadline; `CallSkipped`, the credentials were refused), before it takes a connection;
- send: `prepare()` builds (and signs) the request now, after any wait for the budget, and it
  is written at once; `limits.timeout` runs from here to the end of the reply;
- classify: the provider's classifier and parser decide what the reply was; whatever text the
  provider sent back goes through the redactor (`exporter.redaction`) before anything keeps
  it; the attempt is counted, timed and recorded (`exporter.transport.accounting`);
- retry: exponential backoff with full jitter, never past the call's deadline, at least a
  `Retry-After`; 401/403 are never retried, nor a reply over `max_reply_bytes` (`too_large`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from exporter.configkit import Limits
from exporter.logs import LogThrottle, OnChange, get_logger
from exporter.redaction import redact
from exporter.selfmetrics import SelfMetrics
from exporter.transport.accounting import Accounting, Outcome
from exporter.transport.connection import TransportError
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


def _redacted(failure: Failure) -> Failure:
    """`failure` with what the provider said (message, code, request id) fit to keep."""
    return dataclasses.replace(
        failure,
        message=redact(failure.message),
        provider_code=redact(failure.provider_code, 64) or None,
        request_id=redact(failure.request_id, 128) or None,
    )


def _failed(code: str, failure: Failure) -> Outcome:
    return Outcome(code, failure=_redacted(failure))


class LimitedClient:
    """A target's calls over its own HTTP session. `clock` and `sleep` are the gate's and the
    retries' (a test's simulated time)."""

    def __init__(
        self,
        provider: str,
        target: str,
        limits: Limits,
        metrics: SelfMetrics,
        *,
        classifier: Classifier = default_classifier,
        codes: frozenset[str] = frozenset(),
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.provider = provider
        self.target = target
        self.limits = limits
        self._classifier = classifier
        self._clock = clock
        self._sleep = sleep
        self._semaphore = asyncio.Semaphore(limits.max_concurrency)
        self._transport = HttpTransport(limits)
        self.gate = Gate(limits.requests_per_second or None, clock, sleep)
        # Whether the credentials were last accepted.
        self._auth_ok = OnChange(True)
        self._accounting = Accounting(provider, target, metrics, codes, LogThrottle())
        # The target's recent attempts, for its status pages (exporter.status).
        self.call_log = self._accounting.call_log

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
        body is usually passing. `CallDropped` when the first attempt's turn would come after
        `deadline` (the clock's); when a retry's would, the failure before it is raised."""
        classify = classifier or self._classifier
        last: tuple[str, Failure, int] | None = None
        number = 0
        while True:
            try:
                outcome = await self._attempt(prepare, parse, classify, deadline)
            except CallDropped:
                self._accounting.dropped(endpoint)
                if last is None:
                    raise
                raise self._given_up(endpoint, *last) from None
            code = self._accounting.attempt(endpoint, number, outcome)
            if outcome.failure is None:
                self._accepted()
                return cast(T, outcome.value)
            delay = self._retry(endpoint, number, outcome, deadline)
            if delay is None:
                raise self._given_up(endpoint, code, outcome.failure, number + 1)
            self._accounting.retried(endpoint)
            last = (code, outcome.failure, number + 1)
            number += 1
            await self._sleep(delay)

    async def _attempt(
        self,
        prepare: Callable[[], PreparedRequest],
        parse: Callable[[ApiResponse], Any],
        classify: Classifier,
        deadline: float | None,
    ) -> Outcome:
        """Admit, send and classify one attempt."""
        async with self._semaphore:
            await self.gate.admit(deadline)
            admitted = time.perf_counter()
            outcome = await self._send(prepare)
        outcome.took = time.perf_counter() - admitted
        if outcome.response is None:
            return outcome
        return self._classify(outcome, parse, classify)

    async def _send(self, prepare: Callable[[], PreparedRequest]) -> Outcome:
        """Build the request now (a signature made at its write) and send it."""
        try:
            response = await self._transport.send(prepare(), self.gate.record)
        except ReplyTooLarge as exc:
            return _failed(TOO_LARGE, Failure(False, str(exc)))
        except TimeoutError:
            return _failed("timeout", Failure(True, "timed out"))
        except TransportError as exc:
            return _failed("error", Failure(True, exc.__class__.__name__))
        return Outcome(str(response.status), response)

    @staticmethod
    def _classify(
        outcome: Outcome, parse: Callable[[ApiResponse], Any], classify: Classifier
    ) -> Outcome:
        """The reply as the provider's classifier and parser see it."""
        response = outcome.response
        assert response is not None
        try:
            failure = classify(response)
            if failure is None:
                outcome.value = _parsed(parse, response)
                return outcome
        except InvalidReply as exc:
            failure = Failure(True, f"unusable reply: {exc}", code="error")
        outcome.code = failure.code or outcome.code
        outcome.failure = _redacted(failure)
        return outcome

    def _retry(
        self, endpoint: str, number: int, outcome: Outcome, deadline: float | None
    ) -> float | None:
        """How long to wait before attempt `number` + 1, or None to give up: refused
        credentials close the gate, a Retry-After pauses it (and is waited at least)."""
        failure, response = outcome.failure, outcome.response
        assert failure is not None
        if failure.blocks:
            self.gate.block()
        hinted = None
        if response is not None and failure.retryable:
            hinted = retry_after_seconds(response.headers.get("Retry-After"))
            if hinted:
                self._pause(endpoint, hinted)
        if failure.auth or not failure.retryable or number >= self.limits.retries:
            return None
        delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**number))
        if hinted is not None:
            delay = max(delay, min(hinted, MAX_PAUSE))
        if deadline is not None and self._clock() + delay >= deadline:
            # Better to report this call now than to run past its deadline.
            return None
        return delay

    def _pause(self, endpoint: str, seconds: float) -> None:
        was_open = not self.gate.paused
        paused = self.gate.pause(seconds)
        if was_open and paused >= 1:
            self._accounting.log(
                ("paused",),
                log.warning,
                "provider asked to wait (Retry-After): target paused, shown as up 0",
                endpoint=endpoint,
                retry_after=seconds,
                paused_seconds=round(paused, 1),
                max_pause=MAX_PAUSE,
            )

    def _accepted(self) -> None:
        if self._auth_ok.changed(True):
            self._accounting.log(("auth", True), log.info, "credentials accepted again")

    def _given_up(self, endpoint: str, code: str, failure: Failure, attempts: int) -> ApiError:
        """Log a call that failed for good, and the error it raises. Credential trouble is
        logged once per change, not once per call: a target whose list is accepted and whose
        metric calls are refused changes every round, so then once a minute."""
        if failure.auth and self._auth_ok.changed(False):
            self._accounting.log(
                ("auth", False),
                log.error,
                "credentials refused: target marked down until they are accepted",
                code=code,
                request_id=failure.request_id,
            )
        self._accounting.log(
            (endpoint, code),
            log.debug if failure.auth else log.warning,
            "api request failed",
            endpoint=endpoint,
            code=code,
            provider_code=failure.provider_code,
            request_id=failure.request_id,
            message=failure.message,
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
