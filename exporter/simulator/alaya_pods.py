"""The fake Alaya's per-pod data: how busy each job is (`JobProfile`), the curve each series
follows, the `gpu-metrics` elements and the `basic` fields, each a pure function of the seed
and what it is asked for (job, pod, card, metric type, time).

`exporter.simulator.alaya` holds the jobs and their profiles in its world and serves these.
"""

from __future__ import annotations

import math
import random
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

PER_CARD_TYPES = frozenset({"gpu", "vram"})
GPU_MODEL = "NVIDIA-H800A-NV-80G"
# Sample spacing grows with the window so a reply stays around a hundred points.
MAX_POINTS = 120
MIN_STEP = 60


@dataclass(frozen=True, slots=True)
class JobProfile:
    """How busy a job's pods are: the level each curve hovers around."""

    gpu: float
    vram: float
    cpu: float
    memory: float
    # Seconds between checkpoints, when GPU utilisation dips for a minute.
    checkpoint_every: int


def job_profile(rng: random.Random) -> JobProfile:
    return JobProfile(
        gpu=rng.uniform(0.55, 0.92),
        vram=rng.uniform(0.5, 0.9),
        cpu=rng.uniform(0.12, 0.45),
        memory=rng.uniform(0.25, 0.6),
        checkpoint_every=rng.choice((900, 1800, 3600)),
    )


def seeded_jobs(
    rng: random.Random, count: int, pods_per_job: int
) -> tuple[dict[str, list[str]], dict[str, JobProfile]]:
    """`count` jobs of `pods_per_job` pods (`worker-N`) drawn from `rng`: job id -> pods, and
    job id -> profile."""
    jobs: dict[str, list[str]] = {}
    profiles: dict[str, JobProfile] = {}
    for _ in range(count):
        job_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        jobs[job_id] = [f"worker-{i}" for i in range(pods_per_job)]
        profiles[job_id] = job_profile(rng)
    return jobs, profiles


def _noise(*parts: object) -> float:
    """A deterministic number in [0, 1) for `parts` (stable across processes)."""
    # surrogatepass: names may hold lone surrogates (odd names in tests).
    return zlib.crc32("|".join(map(str, parts)).encode("utf-8", "surrogatepass")) / 2**32


def _clip(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 4)


def curve_value(
    profile: JobProfile, series: tuple[object, ...], metric_type: str, t: int, slow: bool
) -> float:
    """The value at unix time `t` of the series `series` (seed, job, pod, card), rounded to 4
    places as replies carry it; `slow`: the card runs at half its peers' GPU utilisation."""
    phase = 2 * math.pi * _noise(*series)
    jitter = _noise(*series, metric_type, t) - 0.5
    wave = math.sin(2 * math.pi * t / 1200 + phase)
    if metric_type == "gpu":
        level = profile.gpu + 0.05 * wave + 0.06 * jitter
        if t % profile.checkpoint_every < MIN_STEP:
            level *= 0.15
        if slow:
            level *= 0.5
        return _clip(level)
    if metric_type == "vram":
        return _clip(profile.vram + 0.015 * wave + 0.01 * jitter)
    if metric_type == "cpu":
        return _clip(profile.cpu + 0.08 * wave + 0.05 * jitter)
    day = (t % 86400) / 86400
    return _clip(profile.memory + 0.05 * day + 0.01 * jitter)


def step_for(seconds: int) -> int:
    steps = max(1, math.ceil(seconds / MAX_POINTS / MIN_STEP))
    return MIN_STEP * steps


def sample_times(start: int, end: int) -> list[int]:
    """Times of the samples inside [start, end], on a grid of `step_for` the window."""
    step = step_for(end - start)
    first = -(-start // step) * step
    return list(range(first, end + 1, step))


def series_element(
    metric_type: str,
    pod_name: str,
    gpu_name: str | None,
    times: Sequence[int],
    values: Sequence[float],
) -> dict[str, Any]:
    """One element of `data.metricData`: a pod's series (a card's, with its `gpu_name`)."""
    element: dict[str, Any] = {
        "type": metric_type,
        "podName": pod_name,
        "maxRate": rate(max(values, default=0.0)),
        "avgRate": rate(sum(values) / len(values) if values else 0.0),
        "currentRate": rate(values[-1] if values else 0.0),
    }
    if gpu_name is not None:
        element["gpuName"] = gpu_name
    element["metricData"] = [
        {"timestamp": t, "value": rate(v)} for t, v in zip(times, values, strict=True)
    ]
    return element


def basic_fields(
    seed: int, job_id: str, pod: str, started_at: int, format_time: Callable[[float], str]
) -> dict[str, Any]:
    """A pod's `basic` reply, as computed (the world lays its overrides over it)."""
    rng = random.Random(repr(("alaya-basic", seed, job_id, pod)))
    created = started_at + rng.randrange(0, 120)
    return {
        "status": "Running",
        "restartCount": rng.choice((0, 0, 0, 1, 2)),
        "hostIp": f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        "podIp": f"172.16.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        "hostName": f"gpu-node-{rng.randrange(1000):03d}",
        "namespace": f"training-{job_id[:8]}",
        "createTime": format_time(created),
    }


def rate(value: float) -> str:
    """A value as the replies' rates and points carry it: up to 4 places, no trailing zeros."""
    return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
