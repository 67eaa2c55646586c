"""The one place provider requests go through: budget, retries, timeouts and accounting.

Each target owns one `ApiClient`: one `aiohttp.ClientSession` whose connector allows
`max_concurrency` connections, a semaphore of the same size, and a `RequestBudget` of
`requests_per_second` (every attempt, retries included, takes a slot: that is what the
provider counts). Every attempt is counted in `training_exporter_api_requests_total{code}`
and timed; retries back off exponentially with full jitter and never run past the call's
deadline. 401/403 are never retried. A reply is read through the kit's capped reader: one over
`max_reply_bytes` fails with code `too_large` and is not retried.

Each client has a `Gate` that every attempt passes right before it is sent (after its slot and
its token, so calls queued before the gate closed do not slip through):
- a `Retry-After` pauses the whole target for that long (at most MAX_PAUSE), not only the call
  that got it: a service that asks for a day's rest once got a request every poll interval;
- refused credentials (a `Failure` that `blocks`) close it until the runner's next round tries
  the job list again: with 24 calls per job, one refusal used to be followed by the rest.
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import aiohttp

from exporter.config import Limits
from exporter.logs import LogThrottle, get_logger
from exporter.providers.kit.body import TOO_LARGE, ReplyTooLarge, read_capped
from exporter.providers.kit.decode import InvalidReply as InvalidReply  # re-exported
from exporter.providers.kit.decode import decode_json
from exporter.selfmetrics import SelfMetrics

log = get_logger(__name__)

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
AUTH_STATUS = frozenset({401, 403})
BACKOFF_BASE = 0.2
BACKOFF_CAP = 10.0
# The longest a Retry-After pauses a target: a day's quota reset is tried again hourly.
MAX_PAUSE = 3600.0


# How far behind the budget's grid may run and be caught up: the event-loop pauses of a busy
# exporter (130-250 ms at 100k series); a longer stall's slots are given up, or the catch-up
# would go on as a burst every second for as long as the stall lasted.
CATCH_UP: Final = 0.25


class RequestBudget:
    """At most `rate` requests a second, paced on a grid of 1/rate slots.

    aiolimiter's one-token bucket counts each wait from the wake-up before it, so every late
    wake-up of a loaded event loop is lost for good: at 100 requests/s on this 2-core machine
    it gave 98 idle and 87 beside a test run. Slots here follow a fixed grid (`acquire`), so
    a late wake-up costs nothing later. No more than floor(rate) requests go
    out in any second even after a stall wakes several at once: `admit` keeps a window of the
    last send times, and runs as the request is written (aiohttp's headers-sent hook), not when
    its slot came. Checked at the slot, an event-loop pause between the two let 33-36 reach the
    provider in one second at 30 requests/s while the sender counted 30. Writes are also at
    least half a slot apart: the slots a stall let pass go out at twice the rate, not at once
    and again at once a second later, when any jitter at the provider's second boundary moved
    the whole burst (13 in a second at 10 requests/s after a 1.5 s stall). That leaves one of
    the provider's `rate + 1` for the jitter between writing and arriving.
    """

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self._interval = 1.0 / rate
        self._clock = clock
        self._next = clock()
        self._sent: deque[float] = deque(maxlen=max(1, math.floor(rate)))
        # Callers of `acquire` in the order they came; the first waits for the slot.
        self._line: deque[asyncio.Future[None]] = deque()

    async def acquire(self) -> None:
        """The grid's next slot, taken once it is due; slots more than CATCH_UP past are given
        up. Not reserved ahead (after a stall every waiting worker would hold a slot long past,
        and all would go at once), but in turn: only the first in line waits for the slot.
        Left to whichever of 8 sleepers woke first, (7/8)^22 = 5 % of calls would wait 22
        slots or more: at scale 3, 730 of 28,172 GPU gaps ran past the interval."""
        turn = asyncio.get_running_loop().create_future()
        line = self._line
        line.append(turn)
        try:
            if line[0] is not turn:
                await turn
            while (wait := self._take_slot()) > 0:
                await asyncio.sleep(wait)
        finally:
            line.remove(turn)
            if line and not line[0].done():
                line[0].set_result(None)

    def _take_slot(self) -> float:
        """0 when the next slot is due (and now taken), else the seconds until it is."""
        now = self._clock()
        slot = max(self._next, now - CATCH_UP)
        if slot > now:
            return slot - now
        self._next = slot + self._interval
        return 0.0

    async def admit(self) -> None:
        """Right before the request is written: wait until the last second holds room for it,
        and half a slot has passed since the last one went."""
        windowed = False
        while True:
            now = self._clock()
            spaced, window = self._waits(now)
            if max(spaced, window) <= 0:
                break
            windowed = windowed or window > 0
            await asyncio.sleep(max(spaced, window))
        self._sent.append(now)
        if windowed:
            # The window, not the grid, set this one's time: later slots follow it, or every
            # second would repeat the last one's burst.
            self._next = max(self._next, now + self._interval)

    def _waits(self, now: float) -> tuple[float, float]:
        sent = self._sent
        spaced = sent[-1] + self._interval / 2 - now if sent else 0.0
        window = sent[0] + 1.0 - now if len(sent) == sent.maxlen else 0.0
        return spaced, window

    def trace(self) -> aiohttp.TraceConfig:
        """Hooks `admit` into a session, so it runs for every request as it is written."""

        async def headers(*_: object) -> None:
            await self.admit()

        config = aiohttp.TraceConfig()
        config.on_request_headers_sent.append(headers)
        return config


class CallSkipped(Exception):
    """The gate was closed when the call's turn came: nothing was sent, nothing counted."""


class Gate:
    """Whether a target's calls may go out now."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.paused_until = 0.0
        self.blocked = False
        # Attempts let through, ever: what the runner measures its achieved rate with.
        self.sent = 0
        self._opened = asyncio.Event()
        self._opened.set()

    @property
    def open(self) -> bool:
        return not self.blocked and self._clock() >= self.paused_until

    @property
    def paused(self) -> bool:
        return self._clock() < self.paused_until

    def pause(self, seconds: float) -> float:
        """Pause for `seconds` (capped at MAX_PAUSE) unless already paused longer; the pause."""
        until = self._clock() + min(seconds, MAX_PAUSE)
        if until > self.paused_until:
            self.paused_until = until
        return self.paused_until - self._clock()

    def block(self) -> None:
        self.blocked = True
        self._opened.clear()

    def unblock(self) -> None:
        self.blocked = False
        self._opened.set()

    async def wait_open(self) -> None:
        while not self.open:
            if self.blocked:
                await self._opened.wait()
            else:
                await asyncio.sleep(max(0.0, self.paused_until - self._clock()))


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes
    _decoded: list[Any] = field(default_factory=list, repr=False, compare=False)

    def json(self) -> Any:
        """The body's JSON, decoded once (a classifier and a parse callback share it);
        `InvalidReply` when it is not JSON."""
        if not self._decoded:
            self._decoded.append(decode_json(self.body))
        return self._decoded[0]


class ApiError(Exception):
    """A call that failed for good. `code` is the HTTP status, or `timeout` / `error`."""

    def __init__(
        self,
        endpoint: str,
        code: str,
        message: str,
        *,
        auth: bool = False,
        request_id: str | None = None,
        provider_code: str | None = None,
    ) -> None:
        super().__init__(f"{endpoint}: {code}: {message}")
        self.endpoint = endpoint
        self.code = code
        self.message = message
        self.auth = auth
        self.request_id = request_id
        self.provider_code = provider_code


T = TypeVar("T")


def _whole_response(response: ApiResponse) -> ApiResponse:
    return response


# Decides, from a response with a 2xx-5xx status, whether it failed and whether to retry.
# Returns None when the response is a success.
Classifier = Callable[[ApiResponse], "Failure | None"]


@dataclass(frozen=True, slots=True)
class Failure:
    retryable: bool
    message: str
    # Credentials trouble: never retried, logged once per change.
    auth: bool = False
    # The credentials were refused: stop the target's calls until the next round.
    blocks: bool = False
    request_id: str | None = None
    provider_code: str | None = None
    # The code label, when it should differ from the HTTP status (Alaya's body status).
    code: str | None = None


def default_classifier(response: ApiResponse) -> Failure | None:
    if response.status < 400:
        return None
    auth = response.status in AUTH_STATUS
    return Failure(
        retryable=response.status in RETRYABLE_STATUS,
        auth=auth,
        blocks=auth,
        message=f"HTTP {response.status}",
    )


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
    that call, never the poll (RecursionError from a nested reply escaped here once)."""
    try:
        return parse(response)
    except InvalidReply:
        raise
    except Exception as exc:
        raise InvalidReply(f"{exc.__class__.__name__} while parsing") from None


class ApiClient:
    def __init__(
        self,
        provider: str,
        target: str,
        limits: Limits,
        metrics: SelfMetrics,
        *,
        classifier: Classifier = default_classifier,
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
        self._limiter = RequestBudget(rps) if rps > 0 else None
        self._session: aiohttp.ClientSession | None = None
        self._auth_failing = False
        self.gate = Gate()
        self._throttle = LogThrottle()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self.limits.max_concurrency, limit_per_host=self.limits.max_concurrency
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trace_configs=[self._limiter.trace()] if self._limiter else None,
                timeout=aiohttp.ClientTimeout(total=self.limits.timeout),
                raise_for_status=False,
                auto_decompress=True,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

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

        `prepare()` runs once the attempt holds its concurrency slot and its token, right
        before sending: so a signature is made when its request goes out, not when it was
        queued (a poll of thousands of calls under a small budget queues for many minutes,
        longer than a signature lives), and a poll's queued calls do not all sign at its start
        while nothing is in flight yet.
        """
        classify = classifier or self._classifier
        attempt = 0
        while True:
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
            if self._limiter is not None:
                await self._limiter.acquire()
            # A retry has waited out any pause (see _next_delay); a refusal stops it too.
            if self.gate.blocked or (self.gate.paused and not retry):
                raise CallSkipped(endpoint)
            self.gate.sent += 1
            request = prepare()
            started = time.perf_counter()
            try:
                async with self.session.request(
                    request.method,
                    request.url,
                    headers=dict(request.headers),
                    data=request.body,
                    allow_redirects=False,
                ) as resp:
                    body = await read_capped(resp, self.limits.max_reply_bytes)
                    return ApiResponse(resp.status, resp.headers, body)
            finally:
                self._metrics.api_request_duration.labels(self.provider, endpoint).observe(
                    time.perf_counter() - started
                )

    def _note_auth(self, ok: bool, code: str = "", request_id: str | None = None) -> None:
        """Log credential trouble once per change, not once per request; a target whose list
        is accepted and whose metric calls are refused changes every round: then once a
        minute, with the count of changes held back."""
        if ok == (not self._auth_failing):
            return
        self._auth_failing = not ok
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

    def _count(self, endpoint: str, code: str) -> None:
        self._metrics.api_requests.labels(self.provider, endpoint, code).inc()
