"""An upstream chooses its status codes: the `code` label stays a closed set whatever it sends."""

from __future__ import annotations

import itertools

import pytest
from aiohttp import web
from pydantic import SecretStr

from exporter.providers.alaya import AlayaTarget
from exporter.providers.alaya.client import AlayaClient, Window
from exporter.selfmetrics import SelfMetrics
from exporter.transport.iface import ApiError


async def test_a_new_failure_code_on_every_call_leaves_at_most_12_code_values(
    aiohttp_server,  # type: ignore[no-untyped-def]
) -> None:
    # A gateway answering HTTP 200 with a failure envelope whose status is new each time.
    statuses = itertools.count(1000)

    async def metrics(request: web.Request) -> web.Response:
        return web.json_response({"status": next(statuses), "message": "no", "data": {}})

    app = web.Application()
    app.router.add_get("/v1/training/instance/{job}/{pod}/gpu-metrics", metrics)
    server = await aiohttp_server(app)
    target = AlayaTarget.model_validate(
        {
            "name": "alaya",
            "endpoint": str(server.make_url("")).rstrip("/"),
            "api_key": SecretStr("k"),
            "jobs": [{"id": "j", "pods": ["p"]}],
            "limits": {"retries": 0, "requests_per_second": "unlimited"},
        }
    )
    registry = SelfMetrics()
    client = AlayaClient(target, registry)
    try:
        for _ in range(100):
            with pytest.raises(ApiError):
                await client.gpu_metrics("j", "p", "gpu", Window(900.0, period="15m"))
    finally:
        await client.close()
    codes = {
        s.labels["code"]: s.value
        for family in registry.registry.collect()
        for s in family.samples
        if s.name == "training_exporter_api_requests_total"
    }
    assert len(codes) <= 12
    assert codes == {"other": 100}
