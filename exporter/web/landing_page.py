"""The landing page at `/`: version, links to the endpoints, each target's status and plan.

Like exporter-toolkit's landing_page.go it is a small static HTML page, behind the same checks
as every other route; unlike it, it lists the targets, so a first look at `/` tells whether the
polls run.
"""

from __future__ import annotations

import html
import platform
from collections.abc import Sequence

from aiohttp import web

from exporter import __version__
from exporter.collector import format_interval
from exporter.providers.registry import titles
from exporter.work.plan import Plan
from exporter.work.runner import TargetRunner


def landing_page(telemetry_path: str, runners: Sequence[TargetRunner]) -> web.Response:
    """The page for a server exporting at `telemetry_path` and polling with `runners`."""
    path = html.escape(telemetry_path)
    rows = []
    for poller in runners:
        provider, target = poller.labels
        facts = ", ".join(
            f"{html.escape(k)}: {html.escape(str(v))}"
            for k, v in poller.provider.describe().items()
        )
        status = (
            "waiting for first poll"
            if not poller.first_poll_done.is_set()
            else (f"{poller.polls} polls")
        )
        rows.append(
            f"<tr><td>{html.escape(provider)}</td><td>{html.escape(target)}</td>"
            f"<td>{facts}</td><td>{html.escape(_plan_text(poller.plan))}</td>"
            f"<td>{html.escape(status)}</td></tr>"
        )
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>training-job-exporter</title></head>
<body>
<h1>training-job-exporter</h1>
<p>Prometheus exporter for training jobs on {html.escape(titles())}.
Version {html.escape(__version__)}, Python {html.escape(platform.python_version())}.</p>
<ul>
<li><a href="{path}">Metrics</a> ({path})</li>
<li><a href="/-/healthy">/-/healthy</a></li>
<li><a href="/-/ready">/-/ready</a></li>
</ul>
<h2>Targets</h2>
<table border="1" cellpadding="4">
<tr><th>provider</th><th>target</th><th>details</th><th>plan</th><th>status</th></tr>
{"".join(rows) or '<tr><td colspan="5">none configured</td></tr>'}
</table>
</body></html>
"""
    return web.Response(text=body, content_type="text/html")


def _plan_text(plan: Plan) -> str:
    """What the target's tiers cost and how often each is read, as the gauges say it."""
    budget = f"{plan.budget:g}" if plan.budget is not None else "unlimited"
    tiers = ", ".join(
        f"{tier} every {format_interval(round(plan.effective[tier], 1))}"
        + (f" ({plan.calls[tier]} calls)" if plan.calls.get(tier) else "")
        + (" stretched" if plan.effective[tier] > plan.configured[tier] + 0.05 else "")
        for tier in plan.effective
    )
    verdict = "more than the budget: slower tiers stretched" if plan.exceeds else "fits"
    return f"needs {plan.required:.2f} of {budget} requests/s ({verdict}); {tiers}"
