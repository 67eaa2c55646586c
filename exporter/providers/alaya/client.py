"""HTTP client of one Alaya NeW target: bearer API key, gpu-metrics and pod basic calls.

Alaya reports a failure two ways: an HTTP error status, or HTTP 200 with a body whose
`status` is not 200 (`{"status": 403, "message": "Forbidden", "data": {}}`). `classify` makes
both the same failure for `ApiClient`: the body status becomes the `code` label, 401/403 are
auth failures (never retried) and 429/5xx are retried like their HTTP twins. The body is
decoded once (`ApiResponse.json`) for both `classify` and the parse callback, and a success
envelope whose `data` has the wrong shape is a bad reply, retried like AIHC's
(`InvalidReply` through `ApiClient.fetch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from exporter import api
from exporter.api import (
    AUTH_STATUS,
    RETRYABLE_STATUS,
    ApiClient,
    ApiError,
    ApiResponse,
    Failure,
    PreparedRequest,
)
from exporter.config import AlayaTarget
from exporter.logs import REDACTED
from exporter.providers.alaya.models import (
    SUCCESS_STATUS,
    Envelope,
    MetricsData,
    PodBasic,
)
from exporter.providers.kit.decode import validate
from exporter.providers.kit.wire import wire_bytes
from exporter.selfmetrics import SelfMetrics

M = TypeVar("M", bound=BaseModel)

PROVIDER = "alaya"
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


class InvalidReply(api.InvalidReply):
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
        self._api = ApiClient(
            PROVIDER, target.name, target.limits, metrics, classifier=self.classify
        )

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
            except api.InvalidReply as exc:
                raise InvalidReply(endpoint, f"data: {exc}") from None

        return await self._api.fetch(endpoint, prepare, parse, deadline=deadline)

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
    return Failure(
        retryable=status in RETRYABLE_STATUS,
        auth=status in AUTH_STATUS,
        message=message,
        code=code,
    )


def _envelope(response: ApiResponse) -> Envelope | None:
    try:
        return validate(Envelope, response.json())
    except api.InvalidReply:
        return None


__all__ = [
    "BASIC",
    "GPU_METRICS",
    "PERIOD_SECONDS",
    "AlayaClient",
    "ApiError",
    "InvalidReply",
    "Window",
    "window_for",
]
