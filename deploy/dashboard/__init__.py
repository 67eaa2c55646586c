"""The Grafana dashboard (grafana/training-jobs.json), built rather than edited by hand so that
every panel uses the same label selectors and the same joins: `blocks` holds what the panels
are made of, `scraped` the panels over the series the exporter serves and `recorded` those
over the series the rule files record. `dashboard` puts them on one page in order.

This folder is loaded by path as the package `deploy_dashboard` (generate.py runs as a script,
not as a package), so its modules import each other relatively.
"""

from __future__ import annotations

from types import ModuleType

from .blocks import Json, lay_out, templating
from .recorded import gpu_hour_panels, lifecycle_panels, rank_panels
from .scraped import (
    event_panels,
    exporter_panels,
    gpu_panels,
    host_panels,
    interconnect_panels,
    job_panels,
)


def dashboard(rank_rules: ModuleType) -> Json:
    """The dashboard's JSON; `rank_rules` is deploy/rank_rules.py, whose numbers the rank and
    GPU-hour panels draw."""
    panels = [
        *job_panels(),
        *gpu_panels(),
        *interconnect_panels(),
        *host_panels(),
        *event_panels(),
        *lifecycle_panels(),
        *rank_panels(rank_rules),
        *gpu_hour_panels(rank_rules),
        *exporter_panels(),
    ]
    return {
        "uid": "training-jobs",
        "title": "Training jobs",
        "description": "GPU training jobs on Baidu AIHC and Alaya NeW Cloud, from "
        "training-job-exporter.",
        "tags": ["training-job-exporter", "gpu", "training"],
        "timezone": "browser",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "links": [],
        "annotations": {
            "list": [
                {
                    "builtIn": 1,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "enable": True,
                    "hide": True,
                    "iconColor": "rgba(0, 211, 255, 1)",
                    "name": "Annotations & Alerts",
                    "type": "dashboard",
                }
            ]
        },
        "templating": templating(),
        "panels": lay_out(panels),
    }
