"""Fake Alaya NeW training API: `gpu-metrics` and `basic` of jobs' pods, and the job list.

Seeded and deterministic: jobs x pods x cards (H800 cards named like the real
`NVIDIA-H800A-NV-80G-3`), and per metric type a plausible curve that is a pure function of
(seed, job, pod, card, time), so a test can ask the world which value a reply carried
(`AlayaWorld.value`). It checks the bearer key and answers 403 when it is wrong, in the form
`auth_error_form` chooses: HTTP 403, or HTTP 200 with `{"status": 403, ...}` (the real service
has been seen doing both). `faults` injects Alaya's own misbehaviours per job/pod/type.

Every name can hold any string: job ids and pods (`add_job`; read from the raw path, so `/`
and invalid bytes work), card names (`gpu_names`) and the pod basic fields (`basic_overrides`),
invalid bytes included (see `exporter.simulator.core.raw`).

A slow card can be planted (`plant_slow_card`, seeded): one card of a job runs at half its
peers' GPU utilisation, the straggler the per-card rank rules look for.

The job list (`GET /api/osm/v1/training/instance/list?pageNo&pageSize`, see
`docs/providers.md`) checks the access-key signature the way the gateway is reported
to (bad header 40001, timestamp more than 5 minutes off the wall clock 40002, signature
mismatch 40003, unknown key 40006, each with HTTP 401), pages newest first, and serves each
job's status at the world's clock: `add_job` / `finish_job`, or start and end times in the
future, make jobs appear and finish between polls. Besides the running jobs whose pods it
serves, the list holds a few finished and pending ones, as a real account's does. Its faults
(`AlayaFault(endpoint="list", page=N)`): `repeat_page`, `empty_page`, `grow_total`, `html`
(the web console's page with HTTP 200), `bad_shape`, and `status` (an error envelope).

This module is the world; `exporter.simulator.alaya_api` (`register_alaya`) serves it over HTTP.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import random
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

DEMO_API_KEY = "APIDEMO3f9b2c7e1a"
DEMO_ACCESS_KEY_ID = "AKDEMO7d1e9a4b6c"
DEMO_SECRET_ACCESS_KEY = "SKDEMO2a6f8c0e4b7d9"
LIST_PATH = "/api/osm/v1/training/instance/list"
LIST_SIGNATURE_SKEW_MS = 5 * 60 * 1000
MAX_LIST_PAGE_SIZE = 1000
# Authorization headers of the last list requests, for tests to check on their own.
LIST_REQUESTS_KEPT = 1000
TYPES = ("gpu", "vram", "cpu", "memory")
PER_CARD_TYPES = frozenset({"gpu", "vram"})
GPU_MODEL = "NVIDIA-H800A-NV-80G"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
PERIOD_SECONDS = {
    "15m": 900,
    "1h": 3600,
    "6h": 21600,
    "24h": 86400,
    "3d": 259200,
    "7d": 604800,
    "30d": 2592000,
}
# Sample spacing grows with the window so a reply stays around a hundred points.
MAX_POINTS = 120
MIN_STEP = 60

ErrorForm = Literal["body", "http"]
FaultKind = Literal[
    "status",
    "empty",
    "empty_data",
    "bad_values",
    "odd_numbers",
    "no_gpu_name",
    "bad_shape",
    "repeat_page",
    "empty_page",
    "grow_total",
    "html",
]


@dataclass
class AlayaFault:
    """One injected misbehaviour for the requests it matches (None matches anything).

    kinds: `status` answers `status` in `form` (HTTP error, or HTTP 200 with the body status);
    `empty` serves `metricData: []`; `empty_data` serves `data: {}`; `bad_values` spoils some
    values (see `_spoil`); `odd_numbers` serves numbers no ratio can be (see `_odd_numbers`);
    `no_gpu_name` serves gpu / vram as one pod-level element without
    `gpuName`; `bad_shape` serves a `data` that is not an object. `times` limits how many
    replies it affects (None: all).
    """

    kind: FaultKind
    status: int = 500
    form: ErrorForm = "body"
    job: str | None = None
    pod: str | None = None
    type: str | None = None
    endpoint: str | None = None
    times: int | None = None
    # Job list faults: the page they hit (None: any).
    page: int | None = None

    def matches(
        self, endpoint: str, job: str, pod: str, metric_type: str | None, page: int | None = None
    ) -> bool:
        return (
            (self.times is None or self.times > 0)
            and self.endpoint in (None, endpoint)
            and self.job in (None, job)
            and self.pod in (None, pod)
            and self.type in (None, metric_type)
            and self.page in (None, page)
        )


@dataclass(frozen=True, slots=True)
class JobProfile:
    """How busy a job's pods are: the level each curve hovers around."""

    gpu: float
    vram: float
    cpu: float
    memory: float
    # Seconds between checkpoints, when GPU utilisation dips for a minute.
    checkpoint_every: int


@dataclass
class ListedJob:
    """A job as the job list shows it; its status follows the world's clock."""

    id: str
    name: str
    workers: int
    created: float
    # None: not started (PENDING) / not finished.
    start: float | None = None
    end: float | None = None
    end_status: str = "SUCCEEDED"
    aidc_id: int = 1
    reason: str = ""

    def status(self, now: float) -> str:
        if self.end is not None and now >= self.end:
            return self.end_status
        if self.start is not None and now >= self.start:
            return "RUNNING"
        return "PENDING"


def _noise(*parts: object) -> float:
    """A deterministic number in [0, 1) for `parts` (stable across processes)."""
    # surrogatepass: names may hold lone surrogates (odd names in tests).
    return zlib.crc32("|".join(map(str, parts)).encode("utf-8", "surrogatepass")) / 2**32


def _clip(value: float) -> float:
    return round(min(1.0, max(0.0, value)), 4)


class AlayaWorld:
    def __init__(
        self,
        seed: int = 1,
        *,
        job_count: int = 2,
        pods_per_job: int = 3,
        cards_per_pod: int = 8,
        api_key: str = DEMO_API_KEY,
        time_zone: str = "Asia/Shanghai",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.seed = seed
        self.api_key = api_key
        self.zone = ZoneInfo(time_zone)
        self.clock = clock
        self.cards_per_pod = cards_per_pod
        self.auth_error_form: ErrorForm = "body"
        # Some gateways quote the rejected key back: tests check it goes no further.
        self.echo_rejected_key = False
        # Keys accepted besides `api_key` (a rotation's old key, while both are valid).
        self.also_accepted: tuple[str, ...] = ()
        self.faults: list[AlayaFault] = []
        # (job id, path pod) -> the reply's podName; None: the path's pod.
        self.reply_pod_name: Callable[[str, str], str] | None = None
        # The cards' `gpuName`s, when set (one card each); else `card_names()`.
        self.gpu_names: list[str] | None = None
        # (job id, pod) -> fields served in its basic reply over the computed ones.
        self.basic_overrides: dict[tuple[str, str], dict[str, Any]] = {}
        # (job id, pod) -> the card (index) that runs at half its peers' GPU utilisation.
        self.slow_cards: dict[tuple[str, str], int] = {}
        rng = random.Random(f"alaya-{seed}")
        # job id -> pod names
        self.jobs: dict[str, list[str]] = {}
        self.profiles: dict[str, JobProfile] = {}
        self.started_at = int(clock()) - rng.randrange(3600, 7 * 86400)
        for _ in range(job_count):
            job_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
            self.jobs[job_id] = [f"worker-{i}" for i in range(pods_per_job)]
            self.profiles[job_id] = job_profile(rng)
        self.access_key_id = DEMO_ACCESS_KEY_ID
        self.secret_access_key = DEMO_SECRET_ACCESS_KEY
        self.list_authorizations: deque[str] = deque(maxlen=LIST_REQUESTS_KEPT)
        # The job list, newest first: the running jobs above, then finished and pending ones.
        self._list_rng = random.Random(f"alaya-list-{seed}")
        self.listed: list[ListedJob] = [
            ListedJob(
                job_id,
                self._job_name(),
                len(pods),
                self.started_at - 120,
                start=self.started_at,
            )
            for job_id, pods in self.jobs.items()
        ]
        for offset, (end_status, reason) in enumerate(HISTORY):
            created = self.started_at - 86400 * (offset + 1)
            job = ListedJob(self._new_id(), self._job_name(), 2, created, start=created + 60)
            if end_status is None:
                job.start = None
            else:
                job.end, job.end_status, job.reason = created + 3600, end_status, reason
            self.listed.append(job)

    # --- the job list -------------------------------------------------------------------

    def _new_id(self) -> str:
        return str(uuid.UUID(int=self._list_rng.getrandbits(128), version=4))

    def _job_name(self) -> str:
        model = self._list_rng.choice(("llama3-8b", "qwen2-72b", "glm4-9b", "mixtral-8x7b"))
        task = self._list_rng.choice(("sft", "pretrain", "dpo", "eval"))
        return f"{model}-{task}-{self._list_rng.randrange(1000):03d}"

    def add_job(
        self,
        pods: int | Sequence[str] = 2,
        *,
        created: float | None = None,
        start: float | None = None,
        end: float | None = None,
        end_status: str = "SUCCEEDED",
        aidc_id: int = 1,
        name: str | None = None,
        job_id: str | None = None,
    ) -> str:
        """A new job at the head of the list, its pods served; running from `start` (default:
        now) until `end` (default: never). `pods`: a count of `worker-N`, or the names (any
        strings); `job_id`: any string, else a new UUID. Returns its id."""
        now = self.clock()
        job_id = job_id if job_id is not None else self._new_id()
        names = [f"worker-{i}" for i in range(pods)] if isinstance(pods, int) else list(pods)
        self.jobs[job_id] = names
        self.profiles[job_id] = job_profile(self._list_rng)
        job = ListedJob(
            job_id,
            name or self._job_name(),
            len(names),
            created if created is not None else (start if start is not None else now),
            start=start if start is not None else now,
            end=end,
            end_status=end_status,
            aidc_id=aidc_id,
        )
        self.listed.insert(0, job)
        return job_id

    def finish_job(self, job_id: str, status: str = "SUCCEEDED", at: float | None = None) -> None:
        job = next(j for j in self.listed if j.id == job_id)
        job.end, job.end_status = (at if at is not None else self.clock()), status

    def list_records(self) -> list[dict[str, Any]]:
        """The job list at the world's clock, newest first, as records."""
        now = self.clock()
        return [self._record(job, now) for job in self.listed if job.created <= now]

    def _record(self, job: ListedJob, now: float) -> dict[str, Any]:
        status = job.status(now)
        record: dict[str, Any] = {
            "id": job.id,
            "name": job.name,
            "status": status,
            "aidcId": job.aidc_id,
            "resource": {"workerCount": job.workers, "gpuCount": 8, "gpuName": GPU_MODEL},
            "createdTime": self.format_time(job.created),
            "startTime": self.format_time(job.start) if job.start and now >= job.start else None,
        }
        finished = job.end is not None and now >= job.end
        # Both spellings the client was seen reading: endTime, else finishTime.
        end_key = "finishTime" if status == "FAILED" else "endTime"
        record[end_key] = self.format_time(job.end) if finished and job.end else None
        record["message" if status == "FAILED" else "reason"] = job.reason if finished else ""
        return record

    def check_signature(self, authorization: str, path: str) -> tuple[int, str] | None:
        """None when `authorization` signs `path` with this world's key pair; else the
        gateway's (code, message)."""
        scheme, _, credential = authorization.partition(" ")
        parts = credential.split(":")
        if scheme != "alayanew-HMAC-SHA256" or len(parts) != 3 or not parts[1].isdigit():
            return 40001, "invalid Authorization header"
        ak, millis, sig = parts
        if abs(time.time() * 1000 - int(millis)) > LIST_SIGNATURE_SKEW_MS:
            return 40002, "timestamp outside +/-5 minutes of the server time"
        if ak != self.access_key_id:
            return 40006, "access key not found"
        message = f"{millis}|GET|{path}".encode()
        expected = hmac.new(self.secret_access_key.encode(), message, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, sig):
            return 40003, "signature mismatch"
        return None

    # --- the data -----------------------------------------------------------------------

    def card_names(self) -> list[str]:
        if self.gpu_names is not None:
            return list(self.gpu_names)
        return [f"{GPU_MODEL}-{i}" for i in range(self.cards_per_pod)]

    def value(self, job_id: str, pod: str, metric_type: str, card: int | None, t: int) -> float:
        """The value of one series at unix time `t`, rounded to 4 places as replies carry it."""
        p = self.profiles[job_id]
        phase = 2 * math.pi * _noise(self.seed, job_id, pod, card)
        jitter = _noise(self.seed, job_id, pod, card, metric_type, t) - 0.5
        wave = math.sin(2 * math.pi * t / 1200 + phase)
        if metric_type == "gpu":
            level = p.gpu + 0.05 * wave + 0.06 * jitter
            if t % p.checkpoint_every < MIN_STEP:
                level *= 0.15
            if card is not None and self.slow_cards.get((job_id, pod)) == card:
                level *= 0.5
            return _clip(level)
        if metric_type == "vram":
            return _clip(p.vram + 0.015 * wave + 0.01 * jitter)
        if metric_type == "cpu":
            return _clip(p.cpu + 0.08 * wave + 0.05 * jitter)
        day = (t % 86400) / 86400
        return _clip(p.memory + 0.05 * day + 0.01 * jitter)

    @staticmethod
    def step_for(seconds: int) -> int:
        steps = max(1, math.ceil(seconds / MAX_POINTS / MIN_STEP))
        return MIN_STEP * steps

    def sample_times(self, start: int, end: int) -> list[int]:
        """Times of the samples inside [start, end], on a grid of `step_for` the window."""
        step = self.step_for(end - start)
        first = -(-start // step) * step
        return list(range(first, end + 1, step))

    def series(
        self, job_id: str, pod: str, metric_type: str, start: int, end: int
    ) -> list[dict[str, Any]]:
        """`data.metricData` for one pod and type over [start, end]."""
        times = self.sample_times(start, end)
        ended = next((j.end for j in self.listed if j.id == job_id and j.end is not None), None)
        if ended is not None:
            # A finished job's pods sampled nothing after it ended.
            times = [t for t in times if t <= ended]
        reply_pod = self.reply_pod_name(job_id, pod) if self.reply_pod_name else pod
        names = self.card_names()
        cards: list[int | None] = (
            list(range(len(names))) if metric_type in PER_CARD_TYPES else [None]
        )
        elements = []
        for card in cards:
            values = [self.value(job_id, pod, metric_type, card, t) for t in times]
            element: dict[str, Any] = {
                "type": metric_type,
                "podName": reply_pod,
                "maxRate": _rate(max(values, default=0.0)),
                "avgRate": _rate(sum(values) / len(values) if values else 0.0),
                "currentRate": _rate(values[-1] if values else 0.0),
            }
            if card is not None:
                element["gpuName"] = names[card]
            element["metricData"] = [
                {"timestamp": t, "value": _rate(v)} for t, v in zip(times, values, strict=True)
            ]
            elements.append(element)
        return elements

    def basic(self, job_id: str, pod: str) -> dict[str, Any]:
        rng = random.Random(repr(("alaya-basic", self.seed, job_id, pod)))
        created = self.started_at + rng.randrange(0, 120)
        return {
            "status": "Running",
            "restartCount": rng.choice((0, 0, 0, 1, 2)),
            "hostIp": f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            "podIp": f"172.16.{rng.randrange(256)}.{rng.randrange(1, 255)}",
            "hostName": f"gpu-node-{rng.randrange(1000):03d}",
            "namespace": f"training-{job_id[:8]}",
            "createTime": self.format_time(created),
            **self.basic_overrides.get((job_id, pod), {}),
        }

    def format_time(self, unix: float) -> str:
        return datetime.fromtimestamp(unix, self.zone).strftime(TIME_FORMAT)

    def parse_time(self, text: str) -> int:
        return int(datetime.strptime(text, TIME_FORMAT).replace(tzinfo=self.zone).timestamp())

    # --- faults -------------------------------------------------------------------------

    def plant_slow_card(self, job_id: str) -> tuple[str, int]:
        """Make one card of `job_id` (which pod and card follow from the seed) run at half
        its peers' GPU utilisation; returns (pod, card index)."""
        rng = random.Random(f"alaya-slow-card-{self.seed}-{job_id}")
        pod = rng.choice(self.jobs[job_id])
        card = rng.randrange(len(self.card_names()))
        self.slow_cards[(job_id, pod)] = card
        return pod, card

    def take_fault(
        self,
        endpoint: str,
        job_id: str,
        pod: str,
        metric_type: str | None,
        page: int | None = None,
    ) -> AlayaFault | None:
        for fault in self.faults:
            if fault.matches(endpoint, job_id, pod, metric_type, page):
                if fault.times is not None:
                    fault.times -= 1
                return fault
        return None


# Finished and pending jobs of the list's history: (end status or None for pending, reason).
HISTORY: tuple[tuple[str | None, str], ...] = (
    ("SUCCEEDED", "Completed"),
    ("FAILED", "OOMKilled: worker-1 exited with code 137"),
    ("STOPPED", "Stopped by user"),
    (None, ""),
)


def job_profile(rng: random.Random) -> JobProfile:
    return JobProfile(
        gpu=rng.uniform(0.55, 0.92),
        vram=rng.uniform(0.5, 0.9),
        cpu=rng.uniform(0.12, 0.45),
        memory=rng.uniform(0.25, 0.6),
        checkpoint_every=rng.choice((900, 1800, 3600)),
    )


def _rate(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
