"""HTTP client of one Alaya NeW target: bearer API key, gpu-metrics and pod basic calls.

Alaya reports a failure two ways: an HTTP error status, or HTTP 200 with a body whose
`status` is not 200 (`{"status": 403, "message": "Forbidden", "data": {}}`). `classify` makes
both the same failure for `LimitedClient`: the body status becomes the `code` label, 401/403 are
auth failures (never retried) and 429/5xx are retried like their HTTP twins. The body is
decoded once (`ApiResponse.json`) for both `classify` and the parse callback, and a success
envelope whose `data` has the wrong shape is a bad reply, retried like AIHC's
(`InvalidReply` through `LimitedClient.fetch`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeVar
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

from pydantic import BaseModel, SecretStr

from exporter.providers.alaya.models import (
    SUCCESS_STATUS,
    Envelope,
    JobPage,
    MetricsData,
    PodBasic,
)
from exporter.providers.alaya.signer import authorization
from exporter.providers.alaya.target import NAME, AlayaTarget
from exporter.providers.kit.decode import validate
from exporter.providers.kit.wire import wire_bytes
from exporter.redaction import REDACTED
from exporter.selfmetrics import SelfMetrics
from exporter.transport import reply
from exporter.transport.iface import (
    AUTH_STATUS,
    RETRYABLE_STATUS,
    ApiError,
    ApiResponse,
    Failure,
    PreparedRequest,
)
from exporter.transport.limited import LimitedClient

M = TypeVar("M", bound=BaseModel)

GPU_METRICS = "gpu-metrics"
BASIC = "basic"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
# Upstream messages end up in logs and errors: keep them short.
MESSAGE_LIMIT = 200

PERIOD_SECONDS: dict[str, float] = {
    "15m": 900.0,
    "1h": 3600.0,
    "6h": 21600.0,
    "24h": 86400.0,
    "3d": 259200.0,
    "7d": 604800.0,
    "30d": 2592000.0,
}


@dataclass(frozen=True, slots=True)
class Window:
    """The query window of one poll: a preset period, or an explicit start/end."""

    seconds: float
    period: str | None = None
    start_time: str | None = None
    end_time: str | None = None

    def query(self) -> dict[str, str]:
        if self.period is not None:
            return {"period": self.period}
        assert self.start_time is not None and self.end_time is not None
        return {"startTime": self.start_time, "endTime": self.end_time}

    def describe(self) -> str:
        return f"period {self.period}" if self.period else f"lookback {self.seconds:g}s"


def window_for(target: AlayaTarget, now: float) -> Window:
    """The window to ask for at unix time `now`: `lookback` up to `now` when set, else the
    period (the configuration loader clears `period` when `lookback` is given)."""
    if target.lookback is None:
        period = target.period or "15m"
        return Window(PERIOD_SECONDS[period], period=period)
    zone = ZoneInfo(target.time_zone)
    start = datetime.fromtimestamp(now - target.lookback, zone).strftime(TIME_FORMAT)
    end = datetime.fromtimestamp(now, zone).strftime(TIME_FORMAT)
    return Window(target.lookback, start_time=start, end_time=end)


class InvalidReply(reply.InvalidReply):
    """A success envelope whose `data` does not have the documented shape: a failed attempt,
    retried, counted as code `error`."""

    def __init__(self, endpoint: str, message: str) -> None:
        super().__init__(f"{endpoint}: {message}")
        self.endpoint = endpoint


class AlayaClient:
    def __init__(self, target: AlayaTarget, metrics: SelfMetrics) -> None:
        if target.api_key is None:
            raise ValueError(f"alaya target {target.name}: api_key was not resolved")
        self._endpoint = target.endpoint
        self._api_key = target.api_key
        self._api = LimitedClient(
            NAME, target.name, target.limits, metrics, classifier=self.classify, codes=CODES
        )
        self.gate = self._api.gate
        self.call_log = self._api.call_log

    async def close(self) -> None:
        await self._api.close()

    async def gpu_metrics(
        self,
        job_id: str,
        pod: str,
        metric_type: str,
        window: Window,
        deadline: float | None = None,
    ) -> MetricsData:
        query = {"type": metric_type, **window.query()}
        return await self._get(GPU_METRICS, job_id, pod, query, deadline, MetricsData)

    async def pod_basic(self, job_id: str, pod: str, deadline: float | None = None) -> PodBasic:
        return await self._get(BASIC, job_id, pod, {}, deadline, PodBasic)

    async def _get(
        self,
        endpoint: str,
        job_id: str,
        pod: str,
        query: dict[str, str],
        deadline: float | None,
        model: type[M],
    ) -> M:
        job, pod_segment = quote(wire_bytes(job_id), safe=""), quote(wire_bytes(pod), safe="")
        path = f"/v1/training/instance/{job}/{pod_segment}/{endpoint}"
        url = self._endpoint + path
        if query:
            url += "?" + urlencode(query, quote_via=quote)

        def prepare() -> PreparedRequest:
            return PreparedRequest(
                "GET",
                url,
                {
                    "Accept": "application/json",
                    "Authorization": f"Bearer {self._api_key.get_secret_value()}",
                },
            )

        def parse(response: ApiResponse) -> M:
            # `classify` accepted it, so it is a success envelope; `{}` (or no data) is empty.
            data = response.json().get("data")
            try:
                return validate(model, {} if data is None else data)
            except reply.InvalidReply as exc:
                raise InvalidReply(endpoint, f"data: {exc}") from None

        return await self._api.fetch(endpoint, prepare, parse, deadline=deadline)

    async def job_list_page(
        self,
        keys: AccessKeys,
        page_no: int,
        page_size: int,
        deadline: float | None = None,
    ) -> JobPage:
        """One page of the job list, signed with the access key pair, through the target's
        `LimitedClient` (budget, retries and accounting shared with every other call)."""
        url = f"{self._endpoint}{JOB_LIST_PATH}?pageNo={page_no}&pageSize={page_size}"

        def prepare() -> PreparedRequest:
            ak, sk = keys.values()
            millis = int(time.time() * 1000)
            return PreparedRequest(
                "GET",
                url,
                {
                    "Accept": "application/json",
                    "Authorization": authorization(ak, sk, millis, "GET", JOB_LIST_PATH),
                },
            )

        def classify(response: ApiResponse) -> Failure | None:
            return self._classify_list(keys, response)

        def parse(response: ApiResponse) -> JobPage:
            # `classify` accepted it, so it is a success envelope.
            try:
                return validate(JobPage, response.json().get("data"))
            except reply.InvalidReply:
                raise InvalidReply(
                    JOB_LIST, "data is not a page of records with totalRows"
                ) from None

        return await self._api.fetch(
            JOB_LIST, prepare, parse, deadline=deadline, classifier=classify
        )

    def _classify_list(self, keys: AccessKeys, response: ApiResponse) -> Failure | None:
        """`classify`'s rules, plus: an HTML page with a success status (the web console, which a
        wrong host or path serves) fails for good, and the gateway's 4xxxx codes are auth failures.
        """
        envelope = _envelope(response)
        if response.status < 400:
            if envelope is None and _looks_like_html(response):
                return Failure(
                    retryable=False,
                    message=f"HTTP {response.status} with an HTML page, not JSON: check that "
                    "endpoint is the API host (https://api.alayanew.com) and that it serves "
                    f"{JOB_LIST_PATH}",
                    code="error",
                )
            if envelope is None:
                return Failure(
                    retryable=True, message="reply is not an Alaya envelope", code="error"
                )
            if envelope.status == SUCCESS_STATUS:
                return None
        status = response.status if response.status >= 400 else envelope.status if envelope else 0
        message = f"HTTP {response.status}" if response.status >= 400 else f"status {status}"
        if envelope is not None and envelope.message:
            text = envelope.message
            for secret in keys.values():
                text = text.replace(secret, REDACTED) if secret else text
            message += f": {self._clean(text)}"
        gateway = envelope is not None and envelope.status in GATEWAY_AUTH_CODES
        auth = status in AUTH_STATUS or gateway
        return Failure(
            retryable=status in RETRYABLE_STATUS and not auth,
            auth=auth,
            message=message,
            code=None if response.status >= 400 else str(status),
        )

    def classify(self, response: ApiResponse) -> Failure | None:
        """Both of Alaya's failure forms as one `Failure`; None for a success envelope."""
        envelope = _envelope(response)
        if response.status >= 400:
            message = f"HTTP {response.status}"
            if envelope is not None and envelope.message:
                message += f": {self._clean(envelope.message)}"
            return _failure_for(response.status, message)
        if envelope is None:
            # A truncated or foreign body (a proxy's page) is worth another attempt.
            return Failure(retryable=True, message="reply is not an Alaya envelope", code="error")
        if envelope.status != SUCCESS_STATUS:
            message = f"status {envelope.status}: {self._clean(envelope.message)}"
            return _failure_for(envelope.status, message, code=str(envelope.status))
        return None

    def _clean(self, message: str) -> str:
        # An upstream that echoes the presented key must not carry it into our errors.
        secret = self._api_key.get_secret_value()
        if secret:
            message = message.replace(secret, REDACTED)
        return message[:MESSAGE_LIMIT]


def _failure_for(status: int, message: str, code: str | None = None) -> Failure:
    # 401: the key itself was refused, so every call would be. A 403 may be about one job's
    # pods only (another team's job named in the jobs file): it fails that call alone.
    return Failure(
        retryable=status in RETRYABLE_STATUS,
        auth=status in AUTH_STATUS,
        blocks=status == 401,
        message=message,
        code=code,
    )


def _envelope(response: ApiResponse) -> Envelope | None:
    try:
        return validate(Envelope, response.json())
    except reply.InvalidReply:
        return None


# --- the job list (list discovery) ---------------------------------------------------------

JOB_LIST = "list"
JOB_LIST_PATH = "/api/osm/v1/training/instance/list"
# The gateway's own errors: 40001-40006 (header, timestamp, signature, key disabled, expired,
# unknown) and 40401 (login expired). None is worth retrying with the same keys.
GATEWAY_AUTH_CODES = range(40000, 50000)
# The `code` label values beyond the transport's: the gateway's documented ones.
CODES: Final = frozenset({"40001", "40002", "40003", "40004", "40005", "40006", "40401"})


@dataclass(frozen=True, slots=True)
class AccessKeys:
    access_key_id: SecretStr
    secret_access_key: SecretStr

    @classmethod
    def of(cls, target: AlayaTarget) -> AccessKeys:
        if target.access_key_id is None or target.secret_access_key is None:
            raise ValueError(f"alaya target {target.name}: the access key pair was not resolved")
        return cls(target.access_key_id, target.secret_access_key)

    def values(self) -> tuple[str, str]:
        return self.access_key_id.get_secret_value(), self.secret_access_key.get_secret_value()


def _looks_like_html(response: ApiResponse) -> bool:
    content_type = response.headers.get("Content-Type", "")
    return "html" in content_type or response.body.lstrip()[:1] == b"<"


__all__ = [
    "BASIC",
    "GPU_METRICS",
    "JOB_LIST",
    "JOB_LIST_PATH",
    "PERIOD_SECONDS",
    "AccessKeys",
    "AlayaClient",
    "ApiError",
    "InvalidReply",
    "Window",
    "window_for",
]
