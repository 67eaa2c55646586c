"""The status pages' routes: `/status.json`, and each target's jobs and recent calls as HTML
and JSON (`docs/status-pages.md`).

They sit on the app beside the telemetry path, so the web config's checks (TLS, client
certificates, basic auth, rate limit) are in front of them as of every route. A handler
reads the runners' status snapshots (`exporter.work.runner_status`) and returns; it never
renders exposition nor waits for a poll. Query strings are bounded: `offset` and `limit` are
integers, clamped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Final

from aiohttp import web

from exporter.web.markup import SECURITY_HEADERS
from exporter.web.status_pages import calls_page, jobs_page
from exporter.web.status_view import (
    DEFAULT_LIMIT,
    Doc,
    calls_document,
    jobs_document,
    status_document,
)
from exporter.work.runner_status import RunnerStatus

# The longest query value read as a number: anything longer is not one of ours.
NUMBER_CHARS: Final = 9

# Every target's status as it is now; or only the named target's (none if there is no such).
Statuses = Callable[[str | None], Sequence[RunnerStatus]]


def add_status_routes(app: web.Application, statuses: Statuses, telemetry_path: str) -> None:
    """The status routes on `app`, over the targets `statuses` gives at the time."""

    def status_of(request: web.Request) -> RunnerStatus:
        for status in statuses(request.match_info["target"]):
            return status
        raise web.HTTPNotFound(text="No such target.\n")

    async def status(request: web.Request) -> web.Response:
        return _json(status_document(statuses(None), telemetry_path))

    async def jobs(request: web.Request) -> web.Response:
        return jobs_page(_jobs(request, status_of(request)))

    async def jobs_json(request: web.Request) -> web.Response:
        return _json(_jobs(request, status_of(request)))

    async def calls(request: web.Request) -> web.Response:
        return calls_page(calls_document(status_of(request)))

    async def calls_json(request: web.Request) -> web.Response:
        return _json(calls_document(status_of(request)))

    app.router.add_get("/status.json", status)
    app.router.add_get("/targets/{target}/jobs", jobs)
    app.router.add_get("/targets/{target}/jobs.json", jobs_json)
    app.router.add_get("/targets/{target}/calls", calls)
    app.router.add_get("/targets/{target}/calls.json", calls_json)


def _jobs(request: web.Request, status: RunnerStatus) -> Doc:
    offset = _number(request, "offset", 0)
    limit = _number(request, "limit", DEFAULT_LIMIT)
    return jobs_document(status, offset, limit)


def _number(request: web.Request, name: str, default: int) -> int:
    raw = request.query.get(name, "")
    if not raw:
        return default
    if len(raw) > NUMBER_CHARS or not raw.isascii() or not raw.isdigit():
        raise web.HTTPBadRequest(text=f"{name} must be a whole number.\n")
    return int(raw)


def _json(doc: Doc) -> web.Response:
    return web.Response(
        text=json.dumps(doc, allow_nan=False),
        content_type="application/json",
        headers=SECURITY_HEADERS,
    )
