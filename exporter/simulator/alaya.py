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

This module is the world, its state and knobs; what it serves is computed in
`exporter.simulator.alaya_pods` (the pods' values, series and basic fields) and
`exporter.simulator.alaya_list` (the job list's records and signature check), and
`exporter.simulator.alaya_api` (`register_alaya`) serves it over HTTP.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from exporter.simulator.alaya_list import (
    ListedJob,
    job_name,
    list_record,
    new_job_id,
    seeded_list,
    signature_refusal,
)
from exporter.simulator.alaya_pods import (
    GPU_MODEL,
    PER_CARD_TYPES,
    basic_fields,
    curve_value,
    job_profile,
    sample_times,
    seeded_jobs,
    series_element,
)

DEMO_API_KEY = "APIDEMO3f9b2c7e1a"
DEMO_ACCESS_KEY_ID = "AKDEMO7d1e9a4b6c"
DEMO_SECRET_ACCESS_KEY = "SKDEMO2a6f8c0e4b7d9"
LIST_PATH = "/api/osm/v1/training/instance/list"
MAX_LIST_PAGE_SIZE = 1000
# Authorization headers of the last list requests, for tests to check on their own.
LIST_REQUESTS_KEPT = 1000
TYPES = ("gpu", "vram", "cpu", "memory")
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


class AlayaWorld:
    """The fake Alaya's state: its jobs and pods, the job list, the keys, the knobs and the
    faults (see the module docstring)."""

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
        self.started_at = int(clock()) - rng.randrange(3600, 7 * 86400)
        # job id -> pod names, and job id -> how busy its pods are
        self.jobs, self.profiles = seeded_jobs(rng, job_count, pods_per_job)
        self.access_key_id, self.secret_access_key = DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY
        self.list_authorizations: deque[str] = deque(maxlen=LIST_REQUESTS_KEPT)
        self._list_rng = random.Random(f"alaya-list-{seed}")
        # The job list, newest first: the running jobs above, then finished and pending ones.
        self.listed = seeded_list(self._list_rng, self.jobs, self.started_at)

    # --- the job list -------------------------------------------------------------------

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
        job_id = job_id if job_id is not None else new_job_id(self._list_rng)
        names = [f"worker-{i}" for i in range(pods)] if isinstance(pods, int) else list(pods)
        self.jobs[job_id] = names
        self.profiles[job_id] = job_profile(self._list_rng)
        job = ListedJob(
            job_id,
            name or job_name(self._list_rng),
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
        return [
            list_record(job, now, self.format_time) for job in self.listed if job.created <= now
        ]

    def check_signature(self, authorization: str, path: str) -> tuple[int, str] | None:
        """None when `authorization` signs `path` with this world's key pair; else the
        gateway's (code, message)."""
        return signature_refusal(authorization, path, self.access_key_id, self.secret_access_key)

    # --- the data -----------------------------------------------------------------------

    def card_names(self) -> list[str]:
        if self.gpu_names is not None:
            return list(self.gpu_names)
        return [f"{GPU_MODEL}-{i}" for i in range(self.cards_per_pod)]

    def value(self, job_id: str, pod: str, metric_type: str, card: int | None, t: int) -> float:
        """The value of one series at unix time `t`, rounded to 4 places as replies carry it."""
        slow = card is not None and self.slow_cards.get((job_id, pod)) == card
        series = (self.seed, job_id, pod, card)
        return curve_value(self.profiles[job_id], series, metric_type, t, slow)

    def sample_times(self, start: int, end: int) -> list[int]:
        """Times of the samples inside [start, end], on a grid that widens with the window
        (`exporter.simulator.alaya_pods.step_for`)."""
        return sample_times(start, end)

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
        return [
            series_element(
                metric_type,
                reply_pod,
                names[card] if card is not None else None,
                times,
                [self.value(job_id, pod, metric_type, card, t) for t in times],
            )
            for card in cards
        ]

    def basic(self, job_id: str, pod: str) -> dict[str, Any]:
        data = basic_fields(self.seed, job_id, pod, self.started_at, self.format_time)
        data.update(self.basic_overrides.get((job_id, pod), {}))
        return data

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
