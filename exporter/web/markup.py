"""The pieces every HTML page here is made of: escaping, durations and times, state words,
tables, and the page itself with its headers.

Every string goes through `text()` (html.escape, quotes included), so a job named `<script>`
shows as that text; the reply's Content-Security-Policy allows no script at all besides.
Pages reload themselves every REFRESH seconds with a meta refresh, no JavaScript. A state is
a word and a colour; a time is "12 s ago" with the absolute UTC time on hover.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from aiohttp import web

REFRESH: Final = 10
# No script, no frame, no form, nothing fetched: the pages are text, links and a style.
SECURITY_HEADERS: Final = {
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
    return web.Response(text=document, content_type="text/html", headers=SECURITY_HEADERS)


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
