"""The fake AIHC's HTTP API: bce-auth-v1 signatures checked as the service checks them, the v2
actions (DescribeJobs, DescribeJob, DescribeJobMetrics, DescribeJobEvents) and the v1 events
path, and BCE's error replies. What it answers with comes from an `AihcWorld`
(`exporter.simulator.aihc`), in the reply bodies `exporter.simulator.aihc_replies` builds.
"""

from __future__ import annotations

import hmac
import json
import random
import time
import urllib.parse
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from exporter.providers.aihc.signer import Credentials, encode, sign
from exporter.providers.aihc.target import AIHC_METRIC_TYPES
from exporter.providers.kit.wire import UNWIRE, unwire
from exporter.simulator import aihc_replies
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_jobs import SimJob, time_line
from exporter.simulator.core import json_response, path_segments, query_of

# How far a signature's timestamp may run ahead of the service's clock.
MAX_CLOCK_SKEW = 900.0
DEFAULT_TIME_STEP = 300


def _request_id() -> str:
    return "sim-" + "".join(random.choices("0123456789abcdef", k=16))


def bce_error(status: int, code: str, message: str) -> web.Response:
    return json_response(
        {"requestId": _request_id(), "code": code, "message": message}, status=status
    )


def canonical_uri(raw_path: str) -> str:
    """The path as the signer canonicalises it: each segment decoded, then encoded again."""
    return "/".join(
        encode(urllib.parse.unquote(segment, errors=UNWIRE)) for segment in raw_path.split("/")
    )


def check_signature(
    request: web.Request, credentials: Mapping[str, str], now: float
) -> web.Response | None:
    """None when the request is signed right; otherwise BCE's error reply."""
    auth = request.headers.get("Authorization", "")
    if not auth:
        return bce_error(403, "AccessDenied", "Authorization header is missing")
    parts = auth.split("/")
    if len(parts) != 6 or parts[0] != "bce-auth-v1":
        return bce_error(400, "InvalidHTTPAuthHeader", "Authorization header is malformed")
    _, access_key_id, when, expiration_text, signed, _signature = parts
    secret = credentials.get(access_key_id)
    if secret is None:
        return bce_error(403, "InvalidAccessKeyId", "the access key id does not exist")
    try:
        timestamp = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        expiration = int(expiration_text)
    except ValueError:
        return bce_error(400, "InvalidHTTPAuthHeader", "Authorization header is malformed")
    if now > timestamp + expiration or timestamp > now + MAX_CLOCK_SKEW:
        return bce_error(400, "RequestExpired", f"Request has expired. Timestamp date is {when}")
    expected = sign(
        Credentials(access_key_id, secret),
        request.method,
        canonical_uri(request.rel_url.raw_path),
        [(k, v) for k, v in request.headers.items() if k.lower() != "authorization"],
        query_of(request),
        timestamp,
        expiration,
        signed.split(";") if signed else None,
    )
    if not hmac.compare_digest(expected.encode(), auth.encode()):
        return bce_error(403, "AccessDenied", "signature does not match")
    return None


class ServiceError(Exception):
    """A BCE error reply: `before_action` hooks raise it to fail a call as the service would."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def _body(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(unwire(raw) if raw else "{}")
    except ValueError:
        raise ServiceError("MalformedJSON", "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ServiceError("MalformedJSON", "the request body must be a JSON object")
    return data


def _int_field(body: Mapping[str, Any], key: str, default: int) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServiceError("MalformedJSON", f"{key} must be a number")
    return value


def _string_number(body: Mapping[str, Any], key: str) -> int | None:
    """startTime / endTime / timeStep: JSON strings holding integers (numbers are refused)."""
    if key not in body:
        return None
    value = body[key]
    if not isinstance(value, str):
        raise ServiceError("MalformedJSON", f"json: cannot unmarshal number into field {key}")
    try:
        return int(value)
    except ValueError:
        raise ServiceError("InvalidParameter", f"{key} must be unix seconds") from None


class _Service:
    def __init__(self, world: AihcWorld) -> None:
        self.world = world

    async def v2(self, request: web.Request) -> web.Response:
        refused = check_signature(request, self.world.credentials, time.time())
        if refused is not None:
            return refused
        action = request.query.get("action", "")
        handler = {
            "DescribeJobs": self.describe_jobs,
            "DescribeJob": self.describe_job,
            "DescribeJobMetrics": self.describe_job_metrics,
            "DescribeJobEvents": self.describe_job_events_v2,
        }.get(action)
        if handler is None:
            return bce_error(400, "InvalidAction", "unknown action")
        try:
            pool = request.query.get("resourcePoolId", "")
            if not pool:
                raise ServiceError("MissingParameter", "resourcePoolId is required")
            if pool not in self.world.pools:
                raise ServiceError("ResourcePoolNotFound", "no such resource pool", 404)
            body = _body(await request.read())
            if self.world.before_action is not None:
                self.world.before_action(action, body)
            return handler(request, pool, body)
        except ServiceError as exc:
            return bce_error(exc.status, exc.code, exc.message)

    def describe_jobs(self, request: web.Request, pool: str, body: dict[str, Any]) -> web.Response:
        world = self.world
        page = _int_field(body, "pageNumber", 1)
        size = _int_field(body, "pageSize", 10)
        if page < 1 or not 1 <= size <= 1000:
            raise ServiceError("InvalidParameter", "pageNumber or pageSize out of range")
        queue = body.get("queue") or query_of(request).get("queueID") or None
        if world.before_page is not None:
            world.before_page(pool, queue, page)
        now = world.now()
        jobs = world.jobs_in(pool, now)
        if queue is not None:
            jobs = [j for j in jobs if j.queue == queue]
        if body.get("status"):
            jobs = [j for j in jobs if j.status_at(now) == body["status"]]
        keyword = body.get("keyword")
        if keyword:
            field_name = "queue" if body.get("keywordType") == "queueName" else "name"
            jobs = [j for j in jobs if str(keyword) in getattr(j, field_name)]
        if body.get("orderBy") == "finishedAt":
            jobs.sort(key=lambda j: (j.finished_at_at(now), j.created_at, j.job_id))
        else:
            jobs.sort(key=lambda j: (j.created_at, j.job_id))
        if body.get("order", "desc") != "asc":
            jobs.reverse()
        chunk = jobs[(page - 1) * size : page * size]
        return json_response(
            {
                "requestId": _request_id(),
                "totalCount": len(jobs),
                "jobs": [aihc_replies.job_item(world, j, now) for j in chunk],
            }
        )

    def _job(self, pool: str, body: Mapping[str, Any]) -> SimJob:
        job_id = body.get("jobId")
        if not isinstance(job_id, str) or not job_id:
            raise ServiceError("MissingParameter", "jobId is required")
        job = self.world.job(job_id)
        if job is None or job.pool != pool:
            raise ServiceError("JobNotFound", "no such job", 404)
        return job

    def describe_job(self, request: web.Request, pool: str, body: dict[str, Any]) -> web.Response:
        job = self._job(pool, body)
        now = self.world.now()
        item = aihc_replies.job_item(self.world, job, now)
        if body.get("needDetail") is True:
            item["pods"] = aihc_replies.pods_at(self.world, job, now)
            # The SDK's DescribeJob carries the status timeline, whichever spelling.
            item.setdefault("jobTimeLine", time_line(job, now))
        request_id = _request_id()
        if self.world.next_shape() == "nested":
            return json_response({"requestId": request_id, "job": item})
        return json_response({"requestId": request_id, **item})

    def describe_job_metrics(
        self, request: web.Request, pool: str, body: dict[str, Any]
    ) -> web.Response:
        if not request.query.get("queueID"):
            raise ServiceError("MissingParameter", "queueID is required")
        job = self._job(pool, body)
        metric_type = body.get("metricType")
        if metric_type not in AIHC_METRIC_TYPES:
            raise ServiceError("InvalidParameter", "unknown metricType")
        start = _string_number(body, "startTime")
        end = _string_number(body, "endTime")
        step = _string_number(body, "timeStep")
        _string_number(body, "rateInterval")
        if not self.world.lively:
            self.world.metric_requests.append(dict(body))
        now = int(self.world.now())
        end = now if end is None else end
        start = int(job.created_at) if start is None else start
        step = DEFAULT_TIME_STEP if step is None else step
        if step <= 0 or start > end:
            raise ServiceError("InvalidParameter", "bad time range")
        series = aihc_replies.metric_series(self.world, job, str(metric_type), start, end, step)
        return json_response({"requestId": _request_id(), "jobId": job.job_id, "metrics": series})

    def _events_reply(self, job: SimJob, start: float | None, end: float | None) -> web.Response:
        now = self.world.now()
        events = aihc_replies.events(job, now)
        if start is not None or end is not None:
            low, high = start or 0.0, end or now
            events = [
                e
                for e in events
                if low
                <= datetime.strptime(str(e["lastTimestamp"]), "%Y-%m-%d %H:%M:%S +0000 UTC")
                .replace(tzinfo=UTC)
                .timestamp()
                <= high
            ]
        return json_response({"events": events, "total": len(events)})

    def describe_job_events_v2(
        self, request: web.Request, pool: str, body: dict[str, Any]
    ) -> web.Response:
        job = self._job(pool, body)
        return self._events_reply(
            job, _string_number(body, "startTime"), _string_number(body, "endTime")
        )

    async def job_events(self, request: web.Request) -> web.Response:
        refused = check_signature(request, self.world.credentials, time.time())
        if refused is not None:
            return refused
        pool = request.query.get("resourcePoolId", "")
        if pool not in self.world.pools:
            return bce_error(404 if pool else 400, "ResourcePoolNotFound", "no such resource pool")
        if request.query.get("jobFramework") != "PyTorchJob":
            return bce_error(400, "InvalidParameter", "jobFramework must be PyTorchJob")
        segments = path_segments(request)
        if len(segments) != 6 or segments[-1] != "events":
            return bce_error(404, "NotFound", "no such path")
        job = self.world.job(segments[4])
        if job is None or job.pool != pool:
            return bce_error(404, "JobNotFound", "no such job")
        try:
            if self.world.before_action is not None:
                self.world.before_action("events", {"jobId": job.job_id})
        except ServiceError as exc:
            return bce_error(exc.status, exc.code, exc.message)
        try:
            start = _query_time(request, "startTime")
            end = _query_time(request, "endTime")
        except ValueError:
            return bce_error(400, "InvalidParameter", "startTime/endTime must be unix seconds")
        return self._events_reply(job, start, end)


def _query_time(request: web.Request, key: str) -> float | None:
    value = request.query.get(key)
    return None if value is None else float(int(value))


def register_aihc(app: web.Application, world: AihcWorld) -> None:
    """Add the AIHC routes to `app`."""
    service = _Service(world)
    app.router.add_post("/", service.v2)
    # Any job id, `/` included (encoded): `job_events` reads it from the raw path.
    app.router.add_get("/api/v1/aijobs/{job_path:[\\s\\S]+}", service.job_events)
