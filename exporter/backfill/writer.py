"""The OpenMetrics file `promtool tsdb create-blocks-from openmetrics` reads.

promtool (2.42) appends each series' samples to a TSDB head: a sample older than the series'
last is refused (`out of order sample`) and the import stops, and OpenMetrics wants every
family's lines together. So the file is written family by family, job by job, each series'
points sorted by time and each timestamp once. A series two jobs both hold (two targets on one
pool) is written once, from the first, as the live exposition keeps the first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from prometheus_client.utils import floatToGoString

from exporter.backfill.state import JobState
from exporter.metrics import SPEC_BY_NAME

Labels = list[tuple[str, str]]


@dataclass(slots=True)
class MergedSeries:
    # `{a="1",b="2"}`: the series' key, and its labels in the file.
    text: str
    # (name, value) pairs sorted by name, without `__name__`.
    labels: Labels
    points: list[tuple[float, float]]


# prometheus-client's value formatting, as the live exposition's (untyped there).
_format_value: Callable[[float], str] = floatToGoString


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def labels_text(names: Iterable[str], values: Iterable[str]) -> str:
    pairs = sorted(zip(names, values))
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}" if pairs else ""


def _timestamp(at: float) -> str:
    return str(int(at)) if at == int(at) else repr(at)


def merged(job: JobState, family: str, seen: set[str]) -> Iterator[MergedSeries]:
    """`family`'s series in `job` that `seen` does not hold yet (then it does), sorted by their
    labels, each with its points sorted by time and each timestamp once (the first read)."""
    series: dict[str, tuple[Labels, dict[float, float]]] = {}
    for names, values, points in job.read(family):
        text = labels_text(names, values)
        if text not in series:
            series[text] = (sorted(zip(names, values)), {})
        by_time = series[text][1]
        for at, value in points:
            by_time.setdefault(float(at), float(value))
    for text in sorted(series):
        if text in seen:
            continue
        seen.add(text)
        labels, by_time = series[text]
        yield MergedSeries(text, labels, sorted(by_time.items()))


def write_family(out: IO[str], family: str, jobs: Iterable[JobState], seen: set[str]) -> int:
    """`family`'s lines from every job; the samples written."""
    spec = SPEC_BY_NAME.get(family)
    kind = spec.kind if spec is not None else "gauge"
    if spec is not None:
        out.write(f"# HELP {family} {_escape(spec.help)}\n")
    out.write(f"# TYPE {family} {kind}\n")
    written = 0
    for job in jobs:
        for series in merged(job, family, seen):
            for at, value in series.points:
                out.write(f"{family}{series.text} {_format_value(value)} {_timestamp(at)}\n")
                written += 1
    return written


def write_openmetrics(path: Path, jobs: list[JobState]) -> int:
    """Every family of `jobs` into `path` (written beside it, then renamed); the samples."""
    families = sorted({f for job in jobs for f in job.families()})
    tmp = path.with_name(path.name + ".tmp")
    written = 0
    with tmp.open("w", encoding="utf-8", errors="replace") as out:
        for family in families:
            written += write_family(out, family, jobs, set())
        out.write("# EOF\n")
    os.replace(tmp, path)
    return written
