"""The status pages' routes: `/status.json`, and each target's jobs and recent calls as HTML
and JSON (`docs/status-pages.md`).

They sit on the app beside the telemetry path, so the web config's checks (TLS, client
certificates, basic auth, rate limit) are in front of them as of every route. A handler
reads the runners' state and the store's snapshot and returns; it never renders exposition
nor waits for a poll. Query strings are bounded: `offset` and `limit` are integers, clamped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Final

from aiohttp import web

from exporter.web.status_pages import HEADERS, calls_page, jobs_page
from exporter.web.status_view import (
    DEFAULT_LIMIT,
    Doc,
    calls_document,
    jobs_document,
    status_document,
)
from exporter.work.runner import TargetRunner

# The longest query value read as a number: anything longer is not one of ours.
NUMBER_CHARS: Final = 9

Runners = Callable[[], Sequence[TargetRunner]]


def add_status_routes(app: web.Application, runners: Runners, telemetry_path: str) -> None:
    """The status routes on `app`, over whatever runners `runners()` returns at the time."""

    def runner_of(request: web.Request) -> TargetRunner:
        name = request.match_info["target"]
        for runner in runners():
            if runner.labels[1] == name:
                return runner
        raise web.HTTPNotFound(text="No such target.\n")

    async def status(request: web.Request) -> web.Response:
        return _json(status_document(runners(), telemetry_path))

    async def jobs(request: web.Request) -> web.Response:
        return jobs_page(_jobs(request, runner_of(request)))

    async def jobs_json(request: web.Request) -> web.Response:
        return _json(_jobs(request, runner_of(request)))

    async def calls(request: web.Request) -> web.Response:
        return calls_page(calls_document(runner_of(request)))

    async def calls_json(request: web.Request) -> web.Response:
        return _json(calls_document(runner_of(request)))

    app.router.add_get("/status.json", status)
    app.router.add_get("/targets/{target}/jobs", jobs)
    app.router.add_get("/targets/{target}/jobs.json", jobs_json)
    app.router.add_get("/targets/{target}/calls", calls)
    app.router.add_get("/targets/{target}/calls.json", calls_json)


def _jobs(request: web.Request, runner: TargetRunner) -> Doc:
    offset = _number(request, "offset", 0)
    limit = _number(request, "limit", DEFAULT_LIMIT)
    return jobs_document(runner, offset, limit)


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
        headers=HEADERS,
    )
