"""The status pages' HTML: a target's jobs and its recent calls, and the pieces the landing
page shares with them.

Each page renders its JSON document (`exporter.web.status_view`). Every string goes through
`text()` (html.escape, quotes included), so a job named `<script>` shows as that text; the
reply's Content-Security-Policy allows no script at all besides. Pages reload themselves
every REFRESH seconds with a meta refresh, no JavaScript. A state is a word and a colour;
a time is "12 s ago" with the absolute UTC time on hover.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import urlencode

from aiohttp import web

from exporter.web.status_view import Doc

REFRESH: Final = 10
# No script, no frame, no form, nothing fetched: the pages are text, links and a style.
HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
# Colours with a word beside them: never the colour alone.
STYLE: Final = """
body{font-family:sans-serif;margin:1em 2em}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:3px 6px;vertical-align:top}
th{background:#eee;text-align:left}
.state{font-weight:bold;padding:1px 6px;border-radius:3px;color:#fff;white-space:nowrap}
.up{background:#2a7d2a}.down,.refused,.failed,.failing{background:#b3261e}
.paused,.stale{background:#b25d00}.starting{background:#555}
tr.bad td{background:#fde8e6}tr.warn td{background:#fff1dc}
.late{color:#b25d00;font-weight:bold}.nowrap{white-space:nowrap}
.msg{font-family:monospace;white-space:pre-wrap;overflow-wrap:anywhere}
"""


def text(value: object) -> str:
    """`value` as HTML text; None as a dash."""
    return "–" if value is None else html.escape(str(value), quote=True)


def seconds(value: float) -> str:
    """A duration as a person reads it: "12 s", "4 min", "3 h", "2 d"."""
    value = abs(value)
    if value < 1:
        return f"{value:.2f} s"
    if value < 120:
        return f"{value:.0f} s"
    if value < 7200:
        return f"{value / 60:.0f} min"
    if value < 172800:
        return f"{value / 3600:.0f} h"
    return f"{value / 86400:.0f} d"


def when(at: float | None, now: float, never: str = "never") -> str:
    """`at` as "12 s ago" (or "in 12 s"), the absolute UTC time on hover."""
    if at is None:
        return text(never)
    stamp = datetime.fromtimestamp(at, UTC)
    shown = f"in {seconds(at - now)}" if at > now + 0.5 else f"{seconds(now - at)} ago"
    return (
        f'<time datetime="{stamp.isoformat(timespec="seconds")}" '
        f'title="{stamp:%Y-%m-%d %H:%M:%S} UTC">{shown}</time>'
    )


def state(word: str) -> str:
    return f'<span class="state {text(word)}">{text(word)}</span>'


def table(headers: Iterable[str], rows: Iterable[str], empty: str) -> str:
    head = "".join(f"<th>{text(h)}</th>" for h in headers)
    body = "".join(rows)
    if not body:
        body = f'<tr><td colspan="99">{text(empty)}</td></tr>'
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, body: str) -> web.Response:
    """A whole page, refreshing itself, behind the pages' headers."""
    document = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{REFRESH}">
<title>{text(title)}</title><style>{STYLE}</style></head>
<body>
{body}
</body></html>
"""
    return web.Response(text=document, content_type="text/html", headers=HEADERS)


def nav(doc: Doc) -> str:
    base = f"/targets/{doc['target']}"
    links = (("/", "all targets"), (f"{base}/jobs", "jobs"), (f"{base}/calls", "recent calls"))
    shown = " · ".join(f'<a href="{text(href)}">{text(label)}</a>' for href, label in links)
    return f"<p>{shown}</p>"


def error_text(error: Mapping[str, Any] | None, now: float) -> str:
    """A failed call in a line: message, endpoint, code, job and when."""
    if error is None:
        return "none"
    job = f", job {text(error['job'])}" if error["job"] else ""
    return (
        f'<span class="msg">{text(error["message"] or "(no message)")}</span> '
        f"({text(error['endpoint'])}, code {text(error['code'])}{job}, "
        f"{when(error['at'], now)})"
    )


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
