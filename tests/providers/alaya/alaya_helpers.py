"""Helpers shared by the Alaya provider tests.

This folder is a package (so its conftest.py is not the importable `conftest` other tests
use): import these relatively."""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from bench.oneshot import PollResult, read_all
from exporter.config import Limits
from exporter.model import Failed, Sample
from exporter.providers.alaya import AlayaJob, AlayaProvider, AlayaTarget
from exporter.providers.base import PollContext
from exporter.selfmetrics import SelfMetrics
from exporter.simulator.alaya import DEMO_API_KEY, AlayaWorld
from tests.scrape_helpers import rendered

FIXTURES = Path(__file__).parent / "fixtures"
# 2025-09-10 18:13:20 in Asia/Shanghai: the simulator's clock in these tests.
T0 = 1_757_499_200
# No request budget (it would only slow the tests down), few and quick retries.
FAST = Limits(requests_per_second=0, retries=2, timeout=5)


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def make_target(url: str, world: AlayaWorld, **overrides: Any) -> AlayaTarget:
    fields: dict[str, Any] = {
        "name": "alaya-test",
        "endpoint": url,
        "api_key": SecretStr(DEMO_API_KEY),
        "jobs": [AlayaJob(id=job_id, pods=pods) for job_id, pods in world.jobs.items()],
        "limits": FAST,
    }
    fields.update(overrides)
    return AlayaTarget(**fields)


async def poll(
    provider: AlayaProvider,
    started_at: float = T0,
    owns_job: Callable[[str], bool] = lambda job_id: True,
) -> PollResult:
    return await read_all(provider, PollContext(time.monotonic() + 60, started_at, owns_job))


def samples(result: PollResult, name: str | None = None) -> list[Sample]:
    found: list[Sample] = []
    for parts in result.jobs.values():
        for outcome in parts.values():
            if isinstance(outcome, Failed):
                continue
            found.extend(s for s in outcome.samples if name is None or s.name == name)
    return found


def part(result: PollResult, job_id: str, name: str) -> tuple[Sample, ...]:
    """The samples of a part that did not fail."""
    outcome = result.jobs[job_id][name]
    assert not isinstance(outcome, Failed), f"{job_id} {name} failed"
    return outcome.samples


def all_drops(metrics: SelfMetrics) -> float:
    return sum(
        s.value
        for family in metrics.registry.collect()
        if family.name == "training_exporter_dropped_values"
        for s in family.samples
        if s.name.endswith("_total")
    )


def labels_of(sample: Sample) -> dict[str, str]:
    return dict(zip(sample.label_names, sample.label_values, strict=True))


def failed_parts(result: PollResult) -> list[tuple[str, str]]:
    return [
        (job_id, part)
        for job_id, parts in result.jobs.items()
        for part, outcome in parts.items()
        if isinstance(outcome, Failed)
    ]


def requests(metrics: SelfMetrics, endpoint: str, code: str) -> float:
    """Alaya requests to `endpoint` answered `code`, over every target."""
    wanted = {"provider": "alaya", "endpoint": endpoint, "code": code}
    return sum(
        s.value
        for family in metrics.registry.collect()
        for s in family.samples
        if s.name == "training_exporter_api_requests_total"
        and all(s.labels.get(k) == v for k, v in wanted.items())
    )


def retries(metrics: SelfMetrics, endpoint: str) -> float:
    value = metrics.registry.get_sample_value(
        "training_exporter_api_retries_total", {"provider": "alaya", "endpoint": endpoint}
    )
    return value or 0.0


def drops(metrics: SelfMetrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "training_exporter_dropped_values_total", {"provider": "alaya", "reason": reason}
    )
    return value or 0.0


def newest_sample_time(world: AlayaWorld, window_seconds: int, end: int = T0) -> int:
    return world.sample_times(end - window_seconds, end)[-1]


# --- the whole exporter, polling on its own (jobs file and list discovery tests) -----------

Series = dict[str, dict[tuple[tuple[str, str], ...], float]]


def parse_exposition(text: str) -> Series:
    found: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return found


class Running:
    """An exporter app polling every `poll_interval` through its own scheduler; read only
    over HTTP (/metrics), so it does not depend on how polls are driven inside."""

    def __init__(self, client: TestClient[Any, Any], target: str) -> None:
        self.client = client
        self.target = target
        label = f'target="{re.escape(target)}"'
        self._count_line = re.compile(
            rf"^training_exporter_poll_duration_seconds_count{{(?:[^}}]*,)?{label}[,}}].* (\S+)$",
            re.M,
        )

    async def scrape(self) -> Series:
        resp = await self.client.get("/metrics")
        assert resp.status == 200
        return parse_exposition(await resp.text())

    async def landing(self) -> str:
        return await (await self.client.get("/")).text()

    def value(self, series: Series, name: str, **labels: str) -> float | None:
        for found, value in series.get(name, {}).items():
            if all(dict(found).get(k) == v for k, v in labels.items()):
                return value
        return None

    async def polls(self) -> int:
        """The target's poll count: its one line in /metrics, the rest of it left unparsed."""
        resp = await self.client.get("/metrics")
        assert resp.status == 200
        found = self._count_line.search(await resp.text())
        return int(float(found[1])) if found else 0

    async def next_full_poll(self, timeout: float = 20.0) -> Series:
        """/metrics once a round that listed after this call has published and is rendered.

        A round's count (the poll duration's) goes up when its list call returns, before its
        readings are kept and published. The round counted next may have listed before the
        caller's change; the one counted after it listed after the change; and its publish
        comes before the round after it is counted: so three counts on. The poll count is a
        self-metric, current in every scrape; the jobs' series are the last complete rendering.
        It is checked every 50 ms, a quarter of these tests' 0.2 s poll interval.
        """
        wanted = await self.polls() + 3
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if await self.polls() >= wanted:
                await rendered(self.client.app)
                return await self.scrape()
            await asyncio.sleep(0.05)
        raise AssertionError(f"no full poll of {self.target} within {timeout} s")

    def count(self, name: str, series: Series) -> float:
        return self.value(series, name, provider="alaya", target=self.target) or 0.0


def jobs_of(series: Series, name: str = "training_pod_gpu_utilization_ratio") -> set[str]:
    return {dict(labels)["job_id"] for labels in series.get(name, {})}


def pods_of(
    series: Series, name: str = "training_pod_cpu_utilization_ratio"
) -> set[tuple[str, str]]:
    return {(dict(labels)["job_id"], dict(labels)["pod"]) for labels in series.get(name, {})}


def log_events(stream: io.StringIO, event: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]
    return [e for e in events if e.get("event") == event]
