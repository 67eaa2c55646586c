"""The fake service's two calls through the exporter's own limited, retrying client."""

from __future__ import annotations

import urllib.parse
from typing import TypeVar

from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiResponse, PreparedRequest
from exporter.transport.limited import LimitedClient
from exporter.transport.reply import InvalidReply
from tests.providers.fake.models import JobList, Load
from tests.providers.fake.target import NAME, FakeTarget

M = TypeVar("M", JobList, Load)


class FakeClient:
    def __init__(self, target: FakeTarget, metrics: SelfMetrics) -> None:
        if target.token is None:
            raise ValueError(f"fake target {target.name}: token was not resolved")
        self.endpoint = target.endpoint
        self.token = target.token
        self.api = LimitedClient(NAME, target.name, target.limits, metrics)

    async def jobs(self, deadline: float) -> JobList:
        return await self._get("jobs", "/fake/v1/jobs", JobList, deadline)

    async def load(self, job_id: str, pod: str, deadline: float) -> Load:
        path = "/fake/v1/jobs/{}/pods/{}/load".format(
            urllib.parse.quote(job_id, safe=""), urllib.parse.quote(pod, safe="")
        )
        return await self._get("load", path, Load, deadline)

    async def _get(self, endpoint: str, path: str, model: type[M], deadline: float) -> M:
        def prepare() -> PreparedRequest:
            auth = f"Bearer {self.token.get_secret_value()}"
            return PreparedRequest("GET", self.endpoint + path, {"Authorization": auth})

        def parse(response: ApiResponse) -> M:
            try:
                return model.model_validate(response.json())
            except ValueError as exc:
                raise InvalidReply(f"{endpoint}: {exc.__class__.__name__}") from None

        return await self.api.fetch(endpoint, prepare, parse, deadline=deadline)

    async def close(self) -> None:
        await self.api.close()
