"""Structural JSON schemas for the prometheus-operator objects the chart renders.

kubernetes-validate ships schemas for Kubernetes' own kinds only; ServiceMonitor, PodMonitor
and PrometheusRule are CRDs (monitoring.coreos.com/v1). These schemas cover the fields the
chart can produce, with the names, types and patterns of the operator's CRDs, and reject any
other field (the API server would prune it silently, which hides typos). Each object's
`metadata` is checked against Kubernetes' own ObjectMeta schema by the caller.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

_DURATION: Schema = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
    r"(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_STRING_MAP: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
_LABEL_NAME: Schema = {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"}


def _object(properties: Schema, required: tuple[str, ...] = ()) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }


_RELABEL_ACTIONS = [
    spelling
    for action in (
        "Replace",
        "Keep",
        "Drop",
        "HashMod",
        "LabelMap",
        "LabelDrop",
        "LabelKeep",
        "Lowercase",
        "Uppercase",
        "KeepEqual",
        "DropEqual",
    )
    for spelling in (action, action.lower())
]
_RELABEL = _object(
    {
        "action": {"enum": _RELABEL_ACTIONS},
        "sourceLabels": {"type": "array", "items": _LABEL_NAME},
        "separator": {"type": "string"},
        "targetLabel": {"type": "string"},
        "regex": {"type": "string"},
        "modulus": {"type": "integer"},
        "replacement": {"type": "string"},
    }
)
_SECRET_KEY = _object(
    {"name": {"type": "string"}, "key": {"type": "string"}, "optional": {"type": "boolean"}},
    ("key",),
)
_LABEL_SELECTOR = _object(
    {
        "matchLabels": _STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": _object(
                {
                    "key": {"type": "string"},
                    "operator": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
                ("key", "operator"),
            ),
        },
    }
)
_NAMESPACE_SELECTOR = _object(
    {"any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}}
)
_ENDPOINT_COMMON: Schema = {
    "port": {"type": "string"},
    "path": {"type": "string"},
    "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
    "interval": _DURATION,
    "scrapeTimeout": _DURATION,
    "honorLabels": {"type": "boolean"},
    "tlsConfig": {"type": "object"},
    "basicAuth": _object({"username": _SECRET_KEY, "password": _SECRET_KEY}),
    "relabelings": {"type": "array", "items": _RELABEL},
    "metricRelabelings": {"type": "array", "items": _RELABEL},
}

_SPECS: dict[str, Schema] = {
    "ServiceMonitor": _object(
        {
            "selector": _LABEL_SELECTOR,
            "namespaceSelector": _NAMESPACE_SELECTOR,
            "jobLabel": {"type": "string"},
            "endpoints": {
                "type": "array",
                "minItems": 1,
                "items": _object(
                    {**_ENDPOINT_COMMON, "targetPort": {"type": ["integer", "string"]}}
                ),
            },
        },
        ("selector", "endpoints"),
    ),
    "PodMonitor": _object(
        {
            "selector": _LABEL_SELECTOR,
            "namespaceSelector": _NAMESPACE_SELECTOR,
            "podMetricsEndpoints": {
                "type": "array",
                "minItems": 1,
                "items": _object(_ENDPOINT_COMMON),
            },
        },
        ("selector", "podMetricsEndpoints"),
    ),
    "PrometheusRule": _object(
        {
            "groups": {
                "type": "array",
                "items": _object(
                    {
                        "name": {"type": "string", "minLength": 1},
                        "interval": _DURATION,
                        "limit": {"type": "integer"},
                        "rules": {
                            "type": "array",
                            "items": _object(
                                {
                                    "alert": {"type": "string"},
                                    "record": {"type": "string"},
                                    "expr": {"type": ["integer", "string"]},
                                    "for": _DURATION,
                                    "keep_firing_for": _DURATION,
                                    "labels": _STRING_MAP,
                                    "annotations": _STRING_MAP,
                                },
                                ("expr",),
                            ),
                        },
                    },
                    ("name",),
                ),
            }
        }
    ),
}


def crd_schema(kind: str) -> Schema | None:
    """The schema of a monitoring.coreos.com/v1 object without its metadata, or None."""
    spec = _SPECS.get(kind)
    if spec is None:
        return None
    return _object(
        {
            "apiVersion": {"const": "monitoring.coreos.com/v1"},
            "kind": {"const": kind},
            "metadata": {"type": "object"},
            "spec": spec,
        },
        ("apiVersion", "kind", "metadata", "spec"),
    )
