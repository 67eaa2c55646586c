"""The status pages' HTML: a target's jobs and its recent calls.

Each page renders its JSON document (`exporter.web.status_view`) with the pieces every page
is made of (`exporter.web.markup`): every string goes through `text()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from exporter.web.markup import error_text, page, state, table, text, when
from exporter.web.status_view import Doc


def nav(doc: Doc) -> str:
    base = f"/targets/{doc['target']}"
    links = (("/", "all targets"), (f"{base}/jobs", "jobs"), (f"{base}/calls", "recent calls"))
    shown = " · ".join(f'<a href="{text(href)}">{text(label)}</a>' for href, label in links)
    return f"<p>{shown}</p>"


def jobs_page(doc: Doc) -> web.Response:
    now = doc["generated_at"]
    rows = [_job_row(job, now) for job in doc["jobs"]]
    title = f"Jobs of {doc['provider']}/{doc['target']}"
    shown = f"{doc['offset'] + 1}-{doc['offset'] + len(doc['jobs'])}" if doc["jobs"] else "none"
    body = (
        f"<h1>{text(title)}</h1>{nav(doc)}"
        f"<p>{doc['total']} jobs, {doc['failing']} failing, {doc['stale']} stale; showing "
        f"{shown}, failing and stalest first. {_pager(doc)}</p>"
        + table(JOB_COLUMNS, rows, "no jobs")
    )
    return page(title, body)


JOB_COLUMNS = (
    "job",
    "name",
    "status",
    "pods",
    "name, status, pods as of",
    "oldest read per tier",
    "failures",
    "last error",
)


def _job_row(job: Mapping[str, Any], now: float) -> str:
    tiers = "<br>".join(
        f"{text(t)}: {when(r['oldest_read_at'], now)}"
        + (' <span class="late">stale</span>' if r["late"] else "")
        + (' <span class="late">last read failed</span>' if r["last_read_failed"] else "")
        for t, r in job["tiers"].items()
    )
    flag = ' class="bad"' if job["failing"] else ""
    word = state("failing") if job["failing"] else ""
    gone = "" if job["exported"] else ' <span class="late">series stale, gone</span>'
    return (
        f"<tr{flag}><td>{text(job['job_id'])} {word}</td><td>{text(job['name'])}</td>"
        f"<td>{text(job['status'])}</td><td>{text(job['pods'])}</td>"
        f"<td class='nowrap'>{when(job['known_at'], now, never='–')}{gone}</td>"
        f"<td class='nowrap'>{tiers or 'no data'}</td><td>{job['failures']}</td>"
        f"<td>{error_text(job['last_error'], now)}</td></tr>"
    )


def _pager(doc: Doc) -> str:
    offset, limit, total = doc["offset"], doc["limit"], doc["total"]
    links = []
    if offset > 0:
        query = urlencode({"offset": max(0, offset - limit), "limit": limit})
        links.append(f'<a href="?{text(query)}">previous {limit}</a>')
    if offset + limit < total:
        query = urlencode({"offset": offset + limit, "limit": limit})
        links.append(f'<a href="?{text(query)}">next {limit}</a>')
    links.append(
        f'<a href="jobs.json?{text(urlencode({"offset": offset, "limit": limit}))}">as JSON</a>'
    )
    return " · ".join(links)


def _call_row(call: Doc, now: float) -> str:
    """One call: when, what, its code and attempt, and a link to its failure if kept."""
    failed = call["failure"] is not None
    result = (
        f'<a href="#failure-{call["failure"]}">{state("failed")}</a>'
        if failed
        else "ok"
        if call["ok"]
        else "failed (detail no longer kept)"
    )
    flag = "" if call["ok"] else ' class="bad"'
    return (
        f"<tr{flag}><td>{when(call['at'], now)}</td>"
        f"<td>{text(call['endpoint'])}</td><td>{text(call['job'])}</td>"
        f"<td>{text(call['code'])}</td><td>{call['attempt']}</td>"
        f"<td>{call['duration'] * 1000:.0f} ms</td><td>{text(call['size'])}</td>"
        f"<td>{result}</td></tr>"
    )


def calls_page(doc: Doc) -> web.Response:
    now = doc["generated_at"]
    rows = [_call_row(call, now) for call in doc["calls"]]
    failures = [
        f'<tr id="failure-{i}"><td>{when(f["at"], now)}</td><td>{text(f["endpoint"])}</td>'
        f"<td>{text(f['job'])}</td><td>{text(f['status'])}</td>"
        f"<td>{text(f['provider_code'])}</td><td>{text(f['request_id'])}</td>"
        f'<td class="msg">{text(f["message"])}</td></tr>'
        for i, f in enumerate(doc["failures"])
    ]
    title = f"Recent calls of {doc['provider']}/{doc['target']}"
    body = (
        f"<h1>{text(title)}</h1>{nav(doc)}"
        f"<p>{doc['total']} calls since start; {doc['failed_since_success']} failed since the "
        f"last success ({when(doc['last_success_at'], now)}). Newest first; "
        f'<a href="calls.json">as JSON</a>.</p><h2>Calls</h2>'
        + table(
            ("when", "endpoint", "job", "code", "attempt", "duration", "reply bytes", "result"),
            rows,
            "no calls yet",
        )
        + "<h2>Failures: what the provider answered</h2>"
        + table(
            ("when", "endpoint", "job", "HTTP status", "provider code", "request id", "message"),
            failures,
            "no failures kept",
        )
    )
    return page(title, body)
