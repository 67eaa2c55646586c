"""The `Client` every provider gets: budget, gate, retries, timeouts and accounting.

Each target owns one: a `Transport` (aiohttp by default) that allows `max_concurrency`
connections, a semaphore of the same size, and a `RequestBudget` of `requests_per_second`
(this replica's share: 1/N with `--shard.count N`), which every attempt, retries included,
passes as it is written: that is what the provider counts. Every attempt is counted in
`training_exporter_api_requests_total{target,code}` and timed; retries back off
exponentially with full jitter and never run past the call's deadline. 401/403 are never
retried. A reply over `max_reply_bytes` fails with code `too_large` and is not retried.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp

from exporter.configkit import Limits
from exporter.logs import LogThrottle, OnChange, get_logger
from exporter.selfmetrics import SelfMetrics
from exporter.status import CallLog, CallRecord, reading_job, redact
from exporter.transport.gate import MAX_PAUSE, Gate
from exporter.transport.http import HttpTransport
from exporter.transport.iface import (
    ApiError,
    ApiResponse,
    CallSkipped,
    Classifier,
    Failure,
    PreparedRequest,
    Transport,
    default_classifier,
)
from exporter.transport.limiter import budget_of
from exporter.transport.reply import TOO_LARGE, InvalidReply, ReplyTooLarge

log = get_logger(__name__)

BACKOFF_BASE = 0.2
BACKOFF_CAP = 10.0

T = TypeVar("T")

# The attempt being written in this task: its endpoint, and whether it is a retry.
_WRITING: contextvars.ContextVar[tuple[str, bool]] = contextvars.ContextVar("writing")


def _whole_response(response: ApiResponse) -> ApiResponse:
    return response


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds from now: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


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
    """A target's calls: `Client` over a `Transport`."""

    def __init__(
        self,
        provider: str,
        target: str,
        limits: Limits,
        metrics: SelfMetrics,
        *,
        classifier: Classifier = default_classifier,
        transport: Transport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.provider = provider
        self.target = target
        self.limits = limits
        self._metrics = metrics
        self._classifier = classifier
        self._sleep = sleep
        self._semaphore = asyncio.Semaphore(limits.max_concurrency)
        rps = limits.requests_per_second
        self._limiter = budget_of(provider, target, rps) if rps > 0 else None
        # `_written` runs as a request is written: in aiohttp's hook, else right before `send`.
        self._hooked = transport is None
        self._transport: Transport = transport or HttpTransport(limits, self._written)
        # Whether the credentials were last accepted.
        self._auth_ok = OnChange(True)
        self.gate = Gate()
        self._throttle = LogThrottle()
        # The target's recent attempts, for its status pages (exporter.status).
        self.calls = CallLog()

    async def close(self) -> None:
        await self._transport.close()

    async def call(
        self,
        endpoint: str,
        prepare: Callable[[], PreparedRequest],
        *,
        deadline: float | None = None,
        classifier: Classifier | None = None,
    ) -> ApiResponse:
        """Send the request `prepare()` builds (again for each attempt: signatures expire)."""
        return await self.fetch(
            endpoint, prepare, _whole_response, deadline=deadline, classifier=classifier
        )

    async def fetch(
        self,
        endpoint: str,
        prepare: Callable[[], PreparedRequest],
        parse: Callable[[ApiResponse], T],
        *,
        deadline: float | None = None,
        classifier: Classifier | None = None,
    ) -> T:
        """`call`, then `parse` the reply; a reply it rejects (InvalidReply) is a failed,
        retryable attempt counted as code `error`: a truncated body is usually passing.

        `prepare()` runs once the attempt holds its concurrency slot, right before sending
        (the budget's wait at the write is then at most `max_concurrency` slots): so a
        signature is made when its request goes out, not when it was queued (a poll of
        thousands of calls under a small budget queues for many minutes, longer than a
        signature lives), and a poll's queued calls do not all sign at its start while nothing
        is in flight yet.
        """
        classify = classifier or self._classifier
        attempt = 0
        while True:
            started, response = time.perf_counter(), None
            try:
                response = await self._attempt(endpoint, prepare, retry=attempt > 0)
                failure = classify(response)
                code = failure.code if failure and failure.code else str(response.status)
                if failure is None:
                    parsed = _parsed(parse, response)
            except ReplyTooLarge as exc:
                failure, code, response = Failure(False, str(exc)), TOO_LARGE, None
            except TimeoutError:
                failure, code, response = Failure(True, "timed out"), "timeout", None
            except aiohttp.ClientError as exc:
                failure, code, response = Failure(True, exc.__class__.__name__), "error", None
            except InvalidReply as exc:
                failure, code = Failure(True, f"unusable reply: {exc}"), "error"
            self._record(endpoint, code, attempt, started, response, failure)
            if failure is None:
                self._count(endpoint, code)
                self._note_auth(ok=True)
                return parsed
            self._count(endpoint, code)
            if failure.blocks:
                self.gate.block()
            delay = self._next_delay(endpoint, attempt, failure, response, deadline)
            if delay is None:
                if failure.auth:
                    self._note_auth(ok=False, code=code, request_id=failure.request_id)
                self._log_failure(endpoint, code, failure, attempt + 1)
                raise ApiError(
                    endpoint,
                    code,
                    failure.message,
                    auth=failure.auth,
                    request_id=failure.request_id,
                    provider_code=failure.provider_code,
                )
            self._metrics.api_retries.labels(self.provider, endpoint).inc()
            attempt += 1
            await self._sleep(delay)

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
            if hinted is not None and hinted > 0:
                self._pause(endpoint, hinted)
        if failure.auth or not failure.retryable or attempt >= self.limits.retries:
            return None
        delay = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
        if hinted is not None:
            delay = max(delay, min(hinted, MAX_PAUSE))
        # A retry waits out the target's pause itself, then goes through the gate.
        delay = max(delay, self.gate.paused_until - time.monotonic())
        if deadline is not None and time.monotonic() + delay >= deadline:
            # Better to report this call now than to run past its deadline.
            return None
        return delay

    def _pause(self, endpoint: str, seconds: float) -> None:
        was_open = not self.gate.paused
        paused = self.gate.pause(seconds)
        if was_open and paused >= 1:
            self._throttle.log(
                ("paused",),
                log.warning,
                "provider asked to wait (Retry-After): target paused, shown as up 0",
                provider=self.provider,
                target=self.target,
                endpoint=endpoint,
                retry_after=seconds,
                paused_seconds=round(paused, 1),
                max_pause=MAX_PAUSE,
            )

    def _log_failure(self, endpoint: str, code: str, failure: Failure, attempts: int) -> None:
        # Auth failures are logged once per change by _note_auth; this line is their detail.
        self._throttle.log(
            (endpoint, code),
            log.debug if failure.auth else log.warning,
            "api request failed",
            provider=self.provider,
            target=self.target,
            endpoint=endpoint,
            code=code,
            provider_code=failure.provider_code,
            request_id=failure.request_id,
            message=failure.message,
            attempts=attempts,
        )

    async def _attempt(
        self, endpoint: str, prepare: Callable[[], PreparedRequest], retry: bool = False
    ) -> ApiResponse:
        async with self._semaphore:
            if self._shut(retry):
                raise CallSkipped(endpoint)
            request = prepare()
            started = time.perf_counter()
            writing = _WRITING.set((endpoint, retry))
            try:
                if not self._hooked:
                    await self._written()
                return await self._transport.send(request)
            finally:
                _WRITING.reset(writing)
                self._metrics.api_request_duration.labels(self.provider, endpoint).observe(
                    time.perf_counter() - started
                )

    def _shut(self, retry: bool) -> bool:
        # A retry has waited out any pause (see _next_delay); a refusal stops it too.
        return self.gate.blocked or (self.gate.paused and not retry)

    async def _written(self) -> None:
        """Take the budget's slot, then pass the gate once more: a pause or a refusal that
        came while the call waited for its slot (a slot per call ahead of it, 0.8 s with 8
        workers at 10 requests/s) stops it before a byte is written."""
        if self._limiter is not None:
            await self._limiter.admit()
        endpoint, retry = _WRITING.get()
        if self._shut(retry):
            raise CallSkipped(endpoint)
        self.gate.sent += 1

    def _note_auth(self, ok: bool, code: str = "", request_id: str | None = None) -> None:
        """Log credential trouble once per change, not once per request; a target whose list
        is accepted and whose metric calls are refused changes every round: then once a
        minute, with the count of changes held back."""
        if not self._auth_ok.changed(ok):
            return
        if ok:
            self._throttle.log(
                ("auth", True),
                log.info,
                "credentials accepted again",
                provider=self.provider,
                target=self.target,
            )
        else:
            self._throttle.log(
                ("auth", False),
                log.error,
                "credentials refused: target marked down until they are accepted",
                provider=self.provider,
                target=self.target,
                code=code,
                request_id=request_id,
            )

    def _record(
        self,
        endpoint: str,
        code: str,
        attempt: int,
        started: float,
        response: ApiResponse | None,
        failure: Failure | None,
    ) -> None:
        self.calls.add(
            CallRecord(
                at=time.time(),
                endpoint=endpoint,
                job=reading_job.get(),
                code=code,
                attempt=attempt + 1,
                duration=time.perf_counter() - started,
                size=None if response is None else len(response.body),
                ok=failure is None,
                status=None if response is None else response.status,
                provider_code=None if failure is None else redact(failure.provider_code, 64),
                request_id=None if failure is None else redact(failure.request_id, 128),
                message="" if failure is None else redact(failure.message),
            )
        )

    def _count(self, endpoint: str, code: str) -> None:
        self._metrics.api_requests.labels(self.provider, self.target, endpoint, code).inc()
