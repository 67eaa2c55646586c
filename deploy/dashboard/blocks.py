"""The dashboard's building blocks: the label selectors every query uses, queries, the kinds of
panel (any panel, time series, ratio, table) with their defaults, state mappings, rows, the
provider, resource pool and job variables, and the layout that gives each panel its id and its
place on the grid.

The panel modules make every panel from these, so that each one uses the same selectors and
the same defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

Json = dict[str, Any]

DATASOURCE: Json = {"type": "prometheus", "uid": "${datasource}"}
# Job-level and pod-level series carry all three identity labels; the exporter's own series
# carry only `provider` (and `target`).
JOB = 'provider=~"$provider", resource_pool=~"$resource_pool", job_id=~"$job"'
EXPORTER = 'provider=~"$provider"'
POD_KEY = "provider, job_id, pod"
POD_LEGEND = "{{job_id}}/{{pod}}"
GRID_WIDTH = 24


def query(expr: str, legend: str = "", ref: str = "A", *, instant: bool = False) -> Json:
    target: Json = {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend or "__auto",
        "refId": ref,
    }
    if instant:
        target.update({"format": "table", "instant": True, "range": False})
    else:
        target.update({"instant": False, "range": True})
    return target


def panel(
    kind: str,
    title: str,
    description: str,
    targets: list[Json],
    *,
    unit: str = "short",
    width: int = 12,
    height: int = 8,
    field_defaults: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    transformations: list[Json] | None = None,
    overrides: list[Json] | None = None,
) -> Json:
    defaults: Json = {"unit": unit, **(field_defaults or {})}
    result: Json = {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": list(overrides or [])},
        "options": dict(options or {}),
        "gridPos": {"w": width, "h": height, "x": 0, "y": 0},
    }
    if transformations:
        result["transformations"] = transformations
    return result


def timeseries(title: str, description: str, targets: list[Json], **kw: Any) -> Json:
    options = {
        "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return panel("timeseries", title, description, targets, options=options, **kw)


def ratio_timeseries(title: str, description: str, targets: list[Json], **kw: Any) -> Json:
    return timeseries(
        title, description, targets, unit="percentunit", field_defaults={"min": 0, "max": 1}, **kw
    )


def table(title: str, description: str, expr: str, *, hide: Iterable[str] = (), **kw: Any) -> Json:
    hidden = {name: True for name in ("Time", *hide)}
    organize = {"id": "organize", "options": {"excludeByName": hidden}}
    return panel(
        "table",
        title,
        description,
        [query(expr, instant=True)],
        transformations=[organize],
        options={"showHeader": True},
        **kw,
    )


def state_mapping(states: Mapping[int, tuple[str, str]]) -> Json:
    return {
        "mappings": [
            {
                "type": "value",
                "options": {
                    str(value): {"text": text, "color": color, "index": index}
                    for index, (value, (text, color)) in enumerate(states.items())
                },
            }
        ],
        "color": {"mode": "thresholds"},
        "thresholds": {
            "mode": "absolute",
            "steps": [{"color": "red", "value": None}, {"color": "green", "value": 1}],
        },
    }


def row(title: str, *, collapsed: bool = False) -> Json:
    """A row; a collapsed one holds its panels (`lay_out` moves them in), and Grafana runs
    their queries only when it is opened."""
    return {
        "type": "row",
        "title": title,
        "collapsed": collapsed,
        "panels": [],
        "gridPos": {"w": GRID_WIDTH, "h": 1, "x": 0, "y": 0},
    }


def selected(metric: str, extra: str = "") -> str:
    return f"{metric}{{{JOB}{extra}}}"


def send_receive(kind: str, unit_metric: str) -> list[Json]:
    """Two queries, send (A) and receive (B), of `training_pod_{kind}_{dir}_{unit_metric}`."""
    return [
        query(
            f"max by ({POD_KEY}) ({selected(f'training_pod_{kind}_{direction}_{unit_metric}')})",
            f"{POD_LEGEND} {label}",
            ref,
        )
        for ref, direction, label in (("A", "transmit", "send"), ("B", "receive", "receive"))
    ]


def or_zero(expr: str) -> str:
    """`expr`, or 0 per provider while the counter has no series yet (nothing counted)."""
    return f"({expr}) or (sum by (provider) (training_exporter_series{{{EXPORTER}}}) * 0)"


def variable(name: str, label: str, expr: str) -> Json:
    """A multi-value query variable over `label_values(...)` whose All matches empty values."""
    return {
        "type": "query",
        "name": name,
        "label": label,
        "datasource": DATASOURCE,
        "definition": expr,
        "query": {"query": expr, "refId": f"{name}-variable"},
        "refresh": 2,
        "includeAll": True,
        # `.*`, not Grafana's default list of values: Alaya series have no resource_pool, and
        # a job that appears after the page loaded must still show.
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "regex": "",
        "hide": 0,
    }


# The job list's info series, and the pods' for jobs a provider lists no info for (Alaya's
# configured jobs have pods but no training_job_info).
INFO_SERIES = '__name__=~"training_job_info|training_pod_info"'


def templating() -> Json:
    return {
        "list": [
            {
                "type": "datasource",
                "name": "datasource",
                "label": "Data source",
                "query": "prometheus",
                "current": {},
                "refresh": 1,
                "regex": "",
                "hide": 0,
            },
            variable("provider", "Provider", f"label_values({{{INFO_SERIES}}}, provider)"),
            variable(
                "resource_pool",
                "Resource pool",
                f'label_values({{{INFO_SERIES}, provider=~"$provider"}}, resource_pool)',
            ),
            variable(
                "job",
                "Job",
                f"label_values({{{INFO_SERIES}, "
                'provider=~"$provider", resource_pool=~"$resource_pool"}, job_id)',
            ),
        ]
    }


def lay_out(panels: list[Json]) -> list[Json]:
    """Give panels ids and grid positions: left to right, wrapping at the grid width. The
    panels after a collapsed row go into it, at the places they take when it is opened, and
    what follows starts right under the closed row."""
    x = y = row_height = 0
    shown: list[Json] = []
    closed: Json | None = None
    for panel_id, item in enumerate(panels, start=1):
        pos = item["gridPos"]
        if item["type"] == "row" and closed is not None:
            x, y, row_height = 0, closed["gridPos"]["y"] + 1, 0
        if x + pos["w"] > GRID_WIDTH or item["type"] == "row":
            x, y = 0, y + row_height
            row_height = 0
        item["id"] = panel_id
        pos.update(x=x, y=y)
        x += pos["w"]
        row_height = max(row_height, pos["h"])
        if item["type"] == "row":
            x, y, row_height = 0, y + pos["h"], 0
            closed = item if item["collapsed"] else None
        if closed is not None and item is not closed:
            closed["panels"].append(item)
        else:
            shown.append(item)
    return shown
