"""The simulator's shared machinery: request log, fault knobs, rate limit, running it.

Both fake providers live on one aiohttp application (their paths do not clash: AIHC is
`POST /?action=…` and `GET /api/v1/aijobs/…`, Alaya is `GET /v1/training/instance/…` and
`GET /api/osm/v1/training/instance/list`). A middleware in front of them logs every request
and injects the faults the knobs ask for, so the provider modules only implement what the
real services do.

Replies are written by `json_response`, which lets a test put any bytes into any string of a
reply: a character U+DC80-U+DCFF is written as the invalid byte it stands for (the
`surrogateescape` convention: `raw(b"\\xff")`), any other lone surrogate as its JSON escape
(`\\ud800`), everything else as UTF-8 (`exporter.providers.kit.wire`). Requests are read back
the same way (`query_of`, `path_segments`, `unwire`), so a name the exporter read from a reply
and sends back finds its job.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import urllib.parse
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from exporter.providers.kit.wire import UNWIRE, json_wire, unwire

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def raw(data: bytes | str) -> str:
    """`data`'s bytes as a string the simulator writes back byte for byte (invalid UTF-8
    included): `raw(b"pod-\\xff")` is served as the bytes `pod-\\xff`."""
    as_bytes = data.encode("latin-1") if isinstance(data, str) else data
    return as_bytes.decode("utf-8", "surrogateescape")


def json_bytes(data: Any) -> bytes:
    """`data` as JSON, with the byte conventions of the module docstring."""
    return json_wire(data)


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=json_bytes(data), status=status, headers=headers, content_type="application/json"
    )


def query_of(request: web.Request) -> dict[str, str]:
    """The query string, decoded the way `json_response` encodes (yarl's `request.query`
    replaces an invalid byte, losing it)."""
    pairs = urllib.parse.parse_qsl(
        request.rel_url.raw_query_string, keep_blank_values=True, errors=UNWIRE
    )
    return dict(pairs)


def path_segments(request: web.Request) -> list[str]:
    """The raw path's segments, each decoded on its own (so `%2F` stays inside its segment)."""
    return [
        urllib.parse.unquote(segment, errors=UNWIRE)
        for segment in request.rel_url.raw_path.split("/")
    ]


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    at: float  # time.monotonic()
    method: str
    path: str
    # AIHC `action`, or the last path segment (`gpu-metrics`, `basic`, `events`).
    endpoint: str
    query: dict[str, str]
    status: int = 0
    # What a per-job request read: (AIHC job id | Alaya "job/pod", the item: a metric type,
    # `pods`, `events`, `basic`); ("", "") for job lists. Benchmarks time each item's reads.
    subject: tuple[str, str] = ("", "")


@dataclass
class Faults:
    """Knobs, changeable while the simulator runs (tests flip them between polls).

    Rates are probabilities per request; `only` limits faults to endpoints whose name is in it.
    """

    # Seconds from a request's arrival to its reply (at least: the reply's making included).
    latency: float = 0.0
    # HTTP status -> probability, e.g. {500: 0.1, 429: 0.05}
    error_rates: dict[int, float] = field(default_factory=dict)
    retry_after: str | None = None
    # The text of the simulated error replies (a gateway echoing what it was sent, say).
    message: str = "simulated"
    malformed_rate: float = 0.0  # truncated JSON
    html_error_rate: float = 0.0  # an HTML error page with status 502
    wrong_types_rate: float = 0.0  # valid JSON, wrong shapes
    reset_rate: float = 0.0  # connection closed without a response
    hang_rate: float = 0.0  # no answer for `hang_seconds`
    hang_seconds: float = 30.0
    # A reply of `oversized_bytes` of valid JSON (one pod of DescribeJobMetrics points),
    # with a Content-Length when `oversized_declared`, else chunked, streamed as it is read.
    oversized_rate: float = 0.0
    oversized_bytes: int = 64 * 1024 * 1024
    oversized_declared: bool = True
    # A reply nested `nested_depth` arrays deep (valid JSON, too deep for a recursive parser).
    nested_rate: float = 0.0
    nested_depth: int = 100_000
    requests_per_second: float = 0.0  # 0: no limit; over it, 429 with Retry-After: 1
    only: frozenset[str] | None = None
    # Faults for the next requests, in order, before any rate applies: an HTTP status, or
    # one of FAULT_KINDS. Tests use it to inject exactly one fault where they want it.
    script: deque[int | str] = field(default_factory=deque)

    def applies(self, endpoint: str) -> bool:
        return self.only is None or endpoint in self.only


class RequestLog:
    def __init__(self, keep: int = 200_000) -> None:
        self.entries: deque[LoggedRequest] = deque(maxlen=keep)
        # Every request logged since start, including those `keep` let go of.
        self.served = 0

    def add(self, entry: LoggedRequest) -> None:
        self.entries.append(entry)
        self.served += 1

    def clear(self) -> None:
        self.entries.clear()

    def count(self, endpoint: str | None = None, status: int | None = None) -> int:
        return sum(
            1
            for e in self.entries
            if (endpoint is None or e.endpoint == endpoint)
            and (status is None or e.status == status)
        )

    def max_in_window(self, seconds: float = 1.0) -> int:
        """Most requests that arrived within any window of `seconds`."""
        return busiest_window([e.at for e in self.entries], seconds)


def busiest_window(times: Iterable[float], seconds: float = 1.0) -> int:
    """Most of `times` within any window [t, t + seconds)."""
    ordered = sorted(times)
    best = start = 0
    for end, t in enumerate(ordered):
        while t - ordered[start] >= seconds:
            start += 1
        best = max(best, end - start + 1)
    return best


def endpoint_of(request: web.Request) -> str:
    action = request.query.get("action")
    if action:
        return action
    return request.path.rstrip("/").rsplit("/", 1)[-1] or "/"


class _RateGate:
    def __init__(self) -> None:
        self._window: deque[float] = deque()

    def admit(self, rps: float) -> bool:
        now = time.monotonic()
        while self._window and now - self._window[0] >= 1.0:
            self._window.popleft()
        if len(self._window) >= rps:
            return False
        self._window.append(now)
        return True


def fault_middleware(faults: Faults, log: RequestLog, rng: random.Random) -> web.middleware:  # type: ignore[valid-type]
    gate = _RateGate()

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        endpoint = endpoint_of(request)
        entry_at = time.monotonic()
        status = 0
        try:
            response = await _with_faults(request, handler, endpoint, faults, rng, gate)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            if request.path not in ("/", "/-/healthy") or request.query.get("action"):
                log.add(
                    LoggedRequest(
                        entry_at,
                        request.method,
                        request.path,
                        endpoint,
                        dict(request.query),
                        status,
                        await _subject(request, endpoint),
                    )
                )

    return middleware


_SUBJECT_ITEMS = {"DescribeJob": "pods", "DescribeJobEvents": "events", "events": "events"}


async def _subject(request: web.Request, endpoint: str) -> tuple[str, str]:
    """(job, item) of a per-job request; the body of a v2 call is read again from aiohttp's
    cache of it."""
    parts = path_segments(request)[1:]
    if request.method == "GET" and len(parts) == 6 and parts[:3] == ["v1", "training", "instance"]:
        item = query_of(request).get("type", "") if endpoint == "gpu-metrics" else endpoint
        return f"{parts[3]}/{parts[4]}", item
    if request.method == "GET" and len(parts) == 5 and parts[:3] == ["api", "v1", "aijobs"]:
        return parts[3], "events"
    if endpoint not in ("DescribeJob", "DescribeJobMetrics", "DescribeJobEvents"):
        return "", ""
    try:
        body = json.loads(unwire(await request.read()))
    except (ValueError, ConnectionError):
        return "", ""
    if not isinstance(body, dict):
        return "", ""
    item = str(body.get("metricType", "")) if endpoint == "DescribeJobMetrics" else ""
    return str(body.get("jobId", "")), item or _SUBJECT_ITEMS[endpoint]


FAULT_KINDS = ("reset", "hang", "html", "malformed", "wrong_types", "oversized", "nested")


def _pick_fault(faults: Faults, rng: random.Random) -> int | str | None:
    """The fault for this request: the next scripted one, else by the configured rates."""
    if faults.script:
        return faults.script.popleft()
    if faults.hang_rate and rng.random() < faults.hang_rate:
        return "hang"
    if faults.reset_rate and rng.random() < faults.reset_rate:
        return "reset"
    for status, rate in sorted(faults.error_rates.items()):
        if rng.random() < rate:
            return status
    if faults.html_error_rate and rng.random() < faults.html_error_rate:
        return "html"
    if faults.malformed_rate and rng.random() < faults.malformed_rate:
        return "malformed"
    if faults.wrong_types_rate and rng.random() < faults.wrong_types_rate:
        return "wrong_types"
    if faults.oversized_rate and rng.random() < faults.oversized_rate:
        return "oversized"
    if faults.nested_rate and rng.random() < faults.nested_rate:
        return "nested"
    return None


async def _with_faults(
    request: web.Request,
    handler: Handler,
    endpoint: str,
    faults: Faults,
    rng: random.Random,
    gate: _RateGate,
) -> web.StreamResponse:
    """The reply to `request`: the handler's, or the one the knobs' fault makes of it."""
    if not faults.applies(endpoint) or request.path == "/-/healthy":
        return await handler(request)
    if faults.requests_per_second and not gate.admit(faults.requests_per_second):
        return _rate_limited()
    arrived = time.monotonic()
    fault = _pick_fault(faults, rng)
    if fault is None:
        # The reply's own making is part of its latency, as a real service's is: so a
        # benchmark's floor of calls x latency / concurrency does not charge the exporter
        # for the simulator's work.
        response = await handler(request)
        if faults.latency:
            await asyncio.sleep(max(0.0, arrived + faults.latency - time.monotonic()))
        return response
    if faults.latency:
        await asyncio.sleep(faults.latency)
    if isinstance(fault, int):
        return _status_reply(fault, faults)
    if fault in _INSTEAD_OF_THE_HANDLER:
        return await _instead_of_the_handler(request, handler, fault, faults)
    return _spoiled(await handler(request), fault)


def _rate_limited() -> web.Response:
    """The reply past `requests_per_second`."""
    return json_response(
        {"code": "RequestLimitExceeded", "message": "Too many requests", "requestId": "sim"},
        status=429,
        headers={"Retry-After": "1"},
    )


def _status_reply(status: int, faults: Faults) -> web.Response:
    """A BCE-style error of HTTP `status`, with the knobs' message and Retry-After."""
    headers = {"Retry-After": faults.retry_after} if faults.retry_after else {}
    return json_response(
        {"requestId": "sim-fault", "code": _bce_code(status), "message": faults.message},
        status=status,
        headers=headers,
    )


# The faults that reply in the handler's stead (a hang answers late, but the handler's way).
_INSTEAD_OF_THE_HANDLER = frozenset({"hang", "reset", "html", "oversized", "nested"})


async def _instead_of_the_handler(
    request: web.Request, handler: Handler, fault: str, faults: Faults
) -> web.StreamResponse:
    """A hang, a reset connection, a gateway's HTML page, or a body too big or too deep."""
    if fault == "hang":
        await asyncio.sleep(faults.hang_seconds)
        return await handler(request)
    if fault == "reset":
        if request.transport is not None:
            request.transport.abort()
        raise ConnectionResetError("simulated reset")
    if fault == "html":
        return web.Response(
            status=502,
            text="<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>",
            content_type="text/html",
        )
    if fault == "oversized":
        return await _oversized(request, faults.oversized_bytes, faults.oversized_declared)
    depth = faults.nested_depth
    body = b'{"requestId":"sim-nested","metrics":' + b"[" * depth + b"]" * depth + b"}"
    return web.Response(body=body, content_type="application/json")


def _spoiled(response: web.StreamResponse, fault: str) -> web.StreamResponse:
    """The handler's reply cut in half (`malformed`), else as valid JSON of the wrong shapes
    (`wrong_types`, and any other scripted name)."""
    if not isinstance(response, web.Response) or response.body is None:
        return response
    if fault == "malformed":
        body = bytes(response.body)  # type: ignore[arg-type]
        return web.Response(
            status=response.status,
            body=body[: max(1, len(body) // 2)],
            content_type="application/json",
        )
    return json_response(
        {
            "requestId": 42,
            "jobs": "nope",
            "totalCount": "many",
            "metrics": {"a": 1},
            "status": "ok",
            "data": [1, 2],
            "events": 7,
            "job": [],
        },
        status=response.status,
    )


_POINT = b'{"time":"1700000000","value":"42.5"}'
_PREFIX = b'{"requestId":"sim-oversized","metrics":[{"podName":"oversized-0","metrics":['
_SUFFIX = b"]}]}"


async def _oversized(request: web.Request, size: int, declared: bool) -> web.StreamResponse:
    """Exactly `size` bytes of valid JSON, written in 64 KiB chunks as the client takes them
    (so serving 22 of 300 MB costs the simulator nothing but the writes)."""
    items = max(1, (size - len(_PREFIX) - len(_SUFFIX) + 1) // (len(_POINT) + 1))
    body_size = len(_PREFIX) + items * (len(_POINT) + 1) - 1 + len(_SUFFIX)
    padding = max(0, size - body_size)
    response = web.StreamResponse(status=200)
    response.content_type = "application/json"
    if declared:
        response.content_length = body_size + padding
    chunk_items = 64 * 1024 // (len(_POINT) + 1)
    chunk = (_POINT + b",") * chunk_items
    try:
        await response.prepare(request)
        await response.write(_PREFIX)
        left = items - 1
        while left > 0:
            take = min(left, chunk_items)
            await response.write(chunk if take == chunk_items else (_POINT + b",") * take)
            left -= take
        await response.write(_POINT + b" " * padding + _SUFFIX)
        await response.write_eof()
    except (ConnectionError, RuntimeError):
        # The client stopped reading (what a capped reader does): nothing more to send.
        pass
    return response


def _bce_code(status: int) -> str:
    return {
        400: "InvalidHTTPRequest",
        401: "AccessDenied",
        403: "AccessDenied",
        429: "RequestLimitExceeded",
        500: "InternalError",
        503: "ServiceUnavailable",
    }.get(status, "InternalError")
