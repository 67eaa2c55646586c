"""The fake Alaya NeW's HTTP API: the bearer key and the job list's access-key signature checked,
`gpu-metrics`, `basic` and the job list answered from an `AlayaWorld`
(`exporter.simulator.alaya`), its faults applied, and Alaya's error replies in either form.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from exporter.simulator.alaya import (
    LIST_PATH,
    MAX_LIST_PAGE_SIZE,
    PERIOD_SECONDS,
    TYPES,
    AlayaFault,
    AlayaWorld,
    ErrorForm,
)
from exporter.simulator.core import json_response, path_segments


def envelope(data: Any, status: int = 200, message: str = "OK") -> dict[str, Any]:
    return {"status": status, "message": message, "data": data}


def error_reply(status: int, message: str, form: ErrorForm) -> web.Response:
    """An Alaya error: HTTP `status`, or HTTP 200 carrying `status` in the body."""
    return json_response(envelope({}, status, message), status=status if form == "http" else 200)


def _spoil(elements: list[dict[str, Any]]) -> list[Any]:
    """Bad values in the first element, plus one element that is not an object.

    Drops: the newest point's value (unparsable), maxRate (not_finite), avgRate (not_finite),
    one point with a bad timestamp appended, and the stray element (invalid_series).
    """
    if not elements:
        return ["oops"]
    first = dict(elements[0])
    points = [dict(p) for p in first["metricData"]]
    if points:
        points[-1]["value"] = "n/a"
    points.append({"timestamp": "later", "value": "0.5"})
    first.update(metricData=points, maxRate="NaN", avgRate="Infinity")
    return [first, *elements[1:], "oops"]


def _odd_numbers(elements: list[dict[str, Any]]) -> list[Any]:
    """The first element's newest point -1, maxRate 12345 and avgRate `1_000` (what Python's
    float() reads as 1000): the values Alaya was seen exporting as ratios."""
    if not elements:
        return elements
    first = dict(elements[0])
    points = [dict(p) for p in first["metricData"]]
    if points:
        points[-1]["value"] = "-1"
    first.update(metricData=points, maxRate="12345", avgRate="1_000")
    return [first, *elements[1:]]


def _pod_aggregate(elements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    aggregate = {k: v for k, v in elements[0].items() if k != "gpuName"}
    return [aggregate]


class _Service:
    """The Alaya routes' handlers, over one world."""

    def __init__(self, world: AlayaWorld) -> None:
        self.world = world

    def authorised(self, request: web.Request) -> bool:
        presented = request.headers.get("Authorization", "")
        keys = (self.world.api_key, *self.world.also_accepted)
        return presented in {f"Bearer {key}" for key in keys}

    def checked(
        self, request: web.Request, endpoint: str, metric_type: str | None
    ) -> web.Response | tuple[str, str, AlayaFault | None]:
        """The job id, pod and fault of a pod request; or the reply refusing it."""
        world = self.world
        if not self.authorised(request):
            message = "Forbidden"
            if world.echo_rejected_key:
                message += f": invalid API key {request.headers.get('Authorization', '')}"
            return error_reply(403, message, world.auth_error_form)
        segments = path_segments(request)
        if len(segments) != 7:
            return error_reply(404, "no such path", "body")
        job_id, pod = segments[4], segments[5]
        if pod not in world.jobs.get(job_id, ()):
            return error_reply(404, "training instance or pod not found", "body")
        fault = world.take_fault(endpoint, job_id, pod, metric_type)
        if fault is not None and fault.kind == "status":
            return error_reply(fault.status, _message(fault.status), fault.form)
        return job_id, pod, fault

    async def route(self, request: web.Request) -> web.Response:
        endpoint = request.rel_url.raw_path.rsplit("/", 1)[-1]
        if endpoint == "gpu-metrics":
            return await self.gpu_metrics(request)
        if endpoint == "basic":
            return await self.basic(request)
        return error_reply(404, "no such path", "body")

    async def gpu_metrics(self, request: web.Request) -> web.Response:
        metric_type = request.query.get("type", "")
        outcome = self.checked(request, "gpu-metrics", metric_type)
        if isinstance(outcome, web.Response):
            return outcome
        if metric_type not in TYPES:
            return error_reply(400, f"invalid type: {metric_type[:20]}", "body")
        job_id, pod, fault = outcome
        window = _window(self.world, request)
        if isinstance(window, web.Response):
            return window
        start, end = window
        if fault is not None and fault.kind == "empty_data":
            return json_response(envelope({}))
        if fault is not None and fault.kind == "bad_shape":
            return json_response(envelope([{"metricData": "lots"}]))
        elements: list[Any] = []
        if fault is None or fault.kind != "empty":
            elements = self.world.series(job_id, pod, metric_type, start, end)
        data = {
            "metricData": _faulty(elements, fault),
            "startTime": self.world.format_time(start),
            "endTime": self.world.format_time(end),
        }
        return json_response(envelope(data))

    async def basic(self, request: web.Request) -> web.Response:
        outcome = self.checked(request, "basic", None)
        if isinstance(outcome, web.Response):
            return outcome
        job_id, pod, fault = outcome
        if fault is not None and fault.kind == "bad_shape":
            return json_response(envelope("Running"))
        if fault is not None and fault.kind in ("empty", "empty_data"):
            return json_response(envelope({}))
        data = self.world.basic(job_id, pod)
        if fault is not None and fault.kind == "bad_values":
            data["restartCount"] = "several"
        return json_response(envelope(data))

    async def job_list(self, request: web.Request) -> web.Response:
        refused = self.list_refusal(request)
        if refused is not None:
            return refused
        try:
            page_no = int(request.query.get("pageNo", "1"))
            page_size = int(request.query.get("pageSize", "10"))
        except ValueError:
            return error_reply(400, "pageNo and pageSize must be integers", "body")
        if page_no < 1 or not 1 <= page_size <= MAX_LIST_PAGE_SIZE:
            return error_reply(400, f"pageSize must be 1-{MAX_LIST_PAGE_SIZE}", "body")
        fault = self.world.take_fault("list", "", "", None, page_no)
        if fault is not None and fault.kind == "status":
            return error_reply(fault.status, _message(fault.status), fault.form)
        if fault is not None and fault.kind == "html":
            return web.Response(text=CONSOLE_PAGE, content_type="text/html")
        if fault is not None and fault.kind == "bad_shape":
            return json_response(envelope("records"))
        records = self.world.list_records()
        total = len(records)
        shown = page_no - 1 if fault is not None and fault.kind == "repeat_page" else page_no
        start = (max(shown, 1) - 1) * page_size
        page = records[start : start + page_size]
        if fault is not None and fault.kind == "empty_page":
            page = []
        if fault is not None and fault.kind == "grow_total":
            total = 10**9
        data = {"records": page, "totalRows": total, "pageNo": page_no, "pageSize": page_size}
        return json_response(envelope(data))

    def list_refusal(self, request: web.Request) -> web.Response | None:
        """The gateway's 401 when the list request is not signed right (its Authorization
        header kept in `list_authorizations` either way); else None."""
        authorization = request.headers.get("Authorization", "")
        self.world.list_authorizations.append(authorization)
        refused = self.world.check_signature(authorization, request.path)
        if refused is None:
            return None
        code, message = refused
        if self.world.echo_rejected_key:
            message += f": {authorization}"
        return json_response({"status": code, "message": message}, status=401)


def _faulty(elements: list[Any], fault: AlayaFault | None) -> list[Any]:
    """`metricData` as `fault` spoils it (`bad_values`, `odd_numbers`, `no_gpu_name`)."""
    if fault is not None and fault.kind == "bad_values":
        return _spoil(elements)
    if fault is not None and fault.kind == "odd_numbers":
        return _odd_numbers(elements)
    if fault is not None and fault.kind == "no_gpu_name" and elements:
        return _pod_aggregate(elements)
    return elements


def register_alaya(app: web.Application, world: AlayaWorld) -> None:
    """Add the Alaya routes to `app`."""
    service = _Service(world)
    # Any job id and pod, `/` included (encoded): `checked` reads them from the raw path.
    app.router.add_get("/v1/training/instance/{instance_path:[\\s\\S]+}", service.route)
    app.router.add_get(LIST_PATH, service.job_list)


# What the documented paths without /api/osm were reported to return: the web console.
CONSOLE_PAGE = (
    '<!DOCTYPE html><html><head><meta charset="utf-8"><title>Alaya NeW</title></head>'
    '<body><div id="app"></div><script src="/static/js/app.js"></script></body></html>'
)


def _window(world: AlayaWorld, request: web.Request) -> tuple[int, int] | web.Response:
    """[start, end] unix seconds from `period`, or from `startTime` / `endTime`."""
    now = int(world.clock())
    period = request.query.get("period")
    if period is not None:
        if period not in PERIOD_SECONDS:
            return error_reply(400, f"invalid period: {period[:20]}", "body")
        return now - PERIOD_SECONDS[period], now
    start_text, end_text = request.query.get("startTime"), request.query.get("endTime")
    if not start_text or not end_text:
        return error_reply(400, "period or startTime and endTime required", "body")
    try:
        start, end = world.parse_time(start_text), world.parse_time(end_text)
    except ValueError:
        return error_reply(400, "startTime and endTime must be YYYY-MM-DD HH:MM:SS", "body")
    if start >= end:
        return error_reply(400, "startTime must be before endTime", "body")
    # No samples from the future.
    return start, min(end, now)


def _message(status: int) -> str:
    return {
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        429: "Too Many Requests",
        500: "Internal Server Error",
        503: "Service Unavailable",
    }.get(status, "Error")
