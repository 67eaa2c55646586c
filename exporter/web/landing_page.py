"""The landing page at `/`: version, links to the endpoints, and each target at a glance.

Like exporter-toolkit's landing_page.go it is a small HTML page, behind the same checks as
every other route; unlike it, it shows each target as Prometheus' /targets page does: its
state and since when, its last error, its last good round, each tier's data age against its
interval, its budget and what it sent, its plan and its jobs, with links to its jobs and its
recent calls (`exporter.web.status_pages`), made of the same pieces (`exporter.web.markup`).
The same is `/status.json`.
"""

from __future__ import annotations

import platform
from collections.abc import Sequence

from aiohttp import web

from exporter import __version__
from exporter.providers.registry import titles
from exporter.web.markup import error_text, page, seconds, state, table, text, when
from exporter.web.status_view import Doc, status_document
from exporter.work.runner_status import Plan, RunnerStatus


def landing_page(telemetry_path: str, statuses: Sequence[RunnerStatus]) -> web.Response:
    """The page for a server exporting at `telemetry_path`, its targets as `statuses` are."""
    doc = status_document(statuses, telemetry_path)
    now = doc["generated_at"]
    rows = [_row(t, _plan_text(s.plan), now) for t, s in zip(doc["targets"], statuses)]
    path = text(telemetry_path)
    body = f"""<h1>training-job-exporter</h1>
<p>Prometheus exporter for training jobs on {text(titles())}.
Version {text(__version__)}, Python {text(platform.python_version())}.</p>
<ul>
<li><a href="{path}">Metrics</a> ({path})</li>
<li><a href="/-/healthy">/-/healthy</a></li>
<li><a href="/-/ready">/-/ready</a></li>
<li><a href="/status.json">/status.json</a>: this page as JSON</li>
</ul>
<h2>Targets</h2>
{table(TARGET_COLUMNS, rows, "none configured")}
"""
    return page("training-job-exporter", body)


TARGET_COLUMNS = (
    "target",
    "state",
    "last error",
    "last good round",
    "data age per tier",
    "budget",
    "plan",
    "jobs",
)


def _row(t: Doc, plan: str, now: float) -> str:
    facts = ", ".join(f"{text(k)}: {text(v)}" for k, v in t["details"].items())
    since = f"since {when(t['since'], now)}" if t["since"] else ""
    paused = f"<br>until {when(t['paused_until'], now)}" if t["paused_until"] else ""
    stale = f"<br>{state('stale')}" if t["stale"] else ""
    failed = t["failed_since_success"]
    error = error_text(t["last_error"], now)
    if failed:
        error += f"<br>{failed} failed since the last success ({when(t['last_success_at'], now)})"
    tiers = "<br>".join(
        f"{text(x['tier'])}: "
        + (
            f"{seconds(x['oldest_age'])} of {seconds(x['effective_interval'])}"
            if x["oldest_age"] is not None
            else f"none yet (every {seconds(x['effective_interval'])})"
        )
        + (' <span class="late">stale</span>' if x["late"] else "")
        for x in t["tiers"]
        if x["calls"] or x["oldest_age"] is not None
    )
    budget = t["budget"]
    share = budget["requests_per_second"]
    links = t["links"]
    mood = "bad" if t["state"] in ("down", "refused") else "warn" if t["stale"] or paused else ""
    return (
        f'<tr class="{mood}"><td><b>{text(t["provider"])}/{text(t["target"])}</b><br>{facts}</td>'
        f"<td>{state(t['state'])} {since}{paused}{stale}</td><td>{error}</td>"
        f"<td>{when(t['last_good_round'], now)}</td>"
        f'<td class="nowrap">{tiers or "no data yet"}</td>'
        f"<td>{'unlimited' if share is None else f'{share:g} requests/s'}; "
        f"{budget['finished_last_minute']} calls ended in the last minute</td><td>{text(plan)}</td>"
        f'<td>{t["jobs"]} · <a href="{text(links["jobs"])}">jobs</a> · '
        f'<a href="{text(links["calls"])}">recent calls</a></td></tr>'
    )


def format_interval(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{seconds:g}s"


def _plan_text(plan: Plan) -> str:
    """What the target's tiers cost and how often each is read, as the gauges say it."""
    budget = f"{plan.budget:g}" if plan.budget is not None else "unlimited"
    tiers = ", ".join(
        f"{tier} every {format_interval(round(plan.effective[tier], 1))}"
        + (f" ({n} calls)" if (n := plan.requests_per_read.get(tier)) else "")
        + (" stretched" if plan.effective[tier] > plan.configured[tier] + 0.05 else "")
        for tier in plan.effective
    )
    verdict = "more than the budget: slower tiers stretched" if plan.exceeds else "fits"
    return f"needs {plan.required:.2f} of {budget} requests/s ({verdict}); {tiers}"
