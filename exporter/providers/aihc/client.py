"""Async AIHC OpenAPI client: signed requests through the target's `LimitedClient`.

Every request is signed like bce-python-sdk's AIHC client signs it (`Host`, `Content-Type`,
`Content-Length` and `x-bce-date` in the default signed set, an empty signed-header list,
`X-API-Version` unsigned), and signed again on every attempt so a retry never carries an
expired timestamp; requests alike in all that is signed within one second share a signature.
BCE's error body `{requestId, code, message}` decides what a failure is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

from yarl import URL

from exporter.providers.aihc import models
from exporter.providers.aihc.signer import (
    CACHED,
    Credentials,
    canonical_time,
    encode,
    encode_path,
    sign,
)
from exporter.providers.aihc.target import NAME, AihcTarget
from exporter.providers.kit.wire import json_wire
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import (
    AUTH_STATUS,
    RETRYABLE_STATUS,
    ApiResponse,
    Failure,
    PreparedRequest,
)
from exporter.transport.limited import LimitedClient

T = TypeVar("T")
# What a signature depends on but the date: method, canonical URI, query pairs, body length.
_Key = tuple[str, str, tuple[tuple[str, str], ...], int]

API_VERSION = "v2"
JOB_FRAMEWORK = "PyTorchJob"
# The BCE error codes that a fresh signature cures.
RESIGN_CODES = frozenset({"RequestExpired"})
MAX_MESSAGE = 200

DESCRIBE_JOBS = "DescribeJobs"
DESCRIBE_JOB = "DescribeJob"
DESCRIBE_JOB_METRICS = "DescribeJobMetrics"
DESCRIBE_JOB_EVENTS = "DescribeJobEvents"


def classify(response: ApiResponse) -> Failure | None:
    """BCE failures: 401/403 are auth (not retried), 429/5xx and RequestExpired are retried."""
    if response.status < 400:
        return None
    error = models.parse_error(response.body)
    code = error.code if error else ""
    request_id = (error.request_id if error else "") or response.headers.get("x-bce-request-id", "")
    resign = code in RESIGN_CODES
    detail = f" {code}" if code else ""
    if error and error.message:
        detail += f": {error.message[:MAX_MESSAGE]}"
    return Failure(
        retryable=resign or response.status in RETRYABLE_STATUS,
        auth=response.status in AUTH_STATUS and not resign,
        # Credentials are the account's: one refusal stops the target's calls until the next
        # round's listing tries them again.
        blocks=response.status in AUTH_STATUS and not resign,
        message=f"HTTP {response.status}{detail}",
        request_id=request_id or None,
        provider_code=code or None,
    )


@lru_cache(maxsize=CACHED)
def _query(params: tuple[tuple[str, str], ...]) -> str:
    """The query string sent: a target's calls carry a handful of distinct ones."""
    return "&".join(f"{encode(k)}={encode(v)}" for k, v in params)


class AihcClient:
    """One per target: the signing, URL and body shapes of the four calls the exporter makes."""

    def __init__(
        self,
        target: AihcTarget,
        metrics: SelfMetrics,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if target.access_key_id is None or target.secret_access_key is None:
            raise ValueError(f"aihc target {target.name}: credentials not resolved")
        self._credentials = Credentials(
            target.access_key_id.get_secret_value(), target.secret_access_key.get_secret_value()
        )
        self._pool = target.resource_pool_id
        base = URL(target.endpoint)
        self._origin = f"{base.scheme}://{base.host_port_subcomponent}"
        self._host = base.host_port_subcomponent or ""
        # A proxy may serve the API under a path prefix; it is part of the signed URI.
        self._base_uri = encode_path(base.path.rstrip("/"))
        self._v2_uri = f"{self._base_uri}/"
        self._clock = clock
        # This second's signatures: a request's Authorization depends on its method, URI,
        # query, body length and second, not on its body, so calls alike in those share one.
        self._second = ""
        self._signatures: dict[_Key, str] = {}
        self.api = LimitedClient(NAME, target.name, target.limits, metrics, classifier=classify)

    async def close(self) -> None:
        await self.api.close()

    async def describe_jobs(
        self, queue: str | None, page: int, page_size: int, deadline: float
    ) -> models.DescribeJobsReply:
        params = {"action": DESCRIBE_JOBS, "resourcePoolId": self._pool}
        body: dict[str, Any] = {
            "orderBy": "createdAt",
            # Oldest first: a job created while we page lands on the last page, shifting none.
            "order": "asc",
            "pageNumber": page,
            "pageSize": page_size,
        }
        if queue:
            params["queueID"] = queue
            body["queue"] = queue
        return await self._v2(DESCRIBE_JOBS, params, body, deadline, models.parse_describe_jobs)

    async def describe_job(self, job_id: str, queue: str, deadline: float) -> models.JobDetail:
        params = {"action": DESCRIBE_JOB, "resourcePoolId": self._pool}
        if queue:
            params["queueID"] = queue

        def parse(body: bytes) -> models.JobDetail:
            detail = models.parse_describe_job(body)
            if detail.job_id != job_id:
                raise models.ReplyError("reply names another job")
            return detail

        body = {"jobId": job_id, "needDetail": True}
        return await self._v2(DESCRIBE_JOB, params, body, deadline, parse)

    async def describe_job_metrics(
        self,
        job_id: str,
        queue: str,
        metric_type: str,
        start: int,
        end: int,
        step: int,
        deadline: float,
    ) -> models.DescribeJobMetricsReply:
        params = {"action": DESCRIBE_JOB_METRICS, "resourcePoolId": self._pool, "queueID": queue}
        # Strings, not numbers: the service answers numbers with 400 MalformedJSON.
        body = {
            "jobId": job_id,
            "metricType": metric_type,
            "startTime": str(start),
            "endTime": str(end),
            "timeStep": str(step),
        }
        return await self._v2(
            DESCRIBE_JOB_METRICS, params, body, deadline, models.parse_describe_job_metrics
        )

    async def job_events(self, job_id: str, deadline: float) -> models.JobEventsReply:
        uri = f"{self._base_uri}/api/v1/aijobs/{encode(job_id)}/events"
        params = {"resourcePoolId": self._pool, "jobFramework": JOB_FRAMEWORK}
        return await self._fetch(
            DESCRIBE_JOB_EVENTS, "GET", uri, params, b"", deadline, models.parse_job_events
        )

    async def _v2(
        self,
        endpoint: str,
        params: Mapping[str, str],
        body: Mapping[str, Any],
        deadline: float,
        parse: Callable[[bytes], T],
    ) -> T:
        return await self._fetch(
            endpoint, "POST", self._v2_uri, params, json_wire(body), deadline, parse
        )

    async def _fetch(
        self,
        endpoint: str,
        method: str,
        canonical_uri: str,
        params: Mapping[str, str],
        body: bytes,
        deadline: float,
        parse: Callable[[bytes], T],
    ) -> T:
        return await self.api.fetch(
            endpoint,
            self._prepare(method, canonical_uri, params, body),
            lambda response: parse(response.body),
            deadline=deadline,
        )

    def _prepare(
        self, method: str, canonical_uri: str, params: Mapping[str, str], body: bytes
    ) -> Callable[[], PreparedRequest]:
        """What builds a call's request at each attempt: what its attempts share (the query,
        the URL, the signature's key) made here, once; the date and signature at each call.
        `canonical_uri` is the path already encoded; it is sent exactly as signed."""
        pairs = tuple(params.items())
        query = _query(pairs)
        url = f"{self._origin}{canonical_uri}" + (f"?{query}" if query else "")
        key = (method, canonical_uri, pairs, len(body))
        return lambda: self._signed_now(key, url, body)

    def signed(
        self, method: str, canonical_uri: str, params: Mapping[str, str], body: bytes
    ) -> PreparedRequest:
        """The request with a signature made now (what a call sends at one attempt)."""
        return self._prepare(method, canonical_uri, params, body)()

    def _signed_now(self, key: _Key, url: str, body: bytes) -> PreparedRequest:
        now = self._clock()
        date = canonical_time(now)
        headers = {
            "Host": self._host,
            "Content-Type": "application/json",
            "Content-Length": str(key[3]),
            "x-bce-date": date,
        }
        headers["Authorization"] = self._authorization(date, key, headers, now)
        headers["X-API-Version"] = API_VERSION
        return PreparedRequest(key[0], url, headers, body or None)

    def _authorization(
        self,
        date: str,
        key: _Key,
        headers: Mapping[str, str],
        now: float,
    ) -> str:
        """`sign()` of the request `key` names, made once a second (at most CACHED kept)."""
        if date != self._second or len(self._signatures) >= CACHED:
            self._second = date
            self._signatures.clear()
        signature = self._signatures.get(key)
        if signature is None:
            method, uri, pairs, _ = key
            signature = sign(self._credentials, method, uri, headers, dict(pairs), now)
            self._signatures[key] = signature
        return signature
