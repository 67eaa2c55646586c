"""Hostile upstream replies through the whole exporter, against the simulator over HTTP.

Each reply is bounded to its own part, counted, and never breaks the exposition: an oversized
reply fails with code `too_large` (the exporter runs as a subprocess so its RSS, read from
/proc, is its own), a deeply nested one fails its call only, and odd strings in any name
field give an exposition promtool accepts, without two series of one family sharing labels.
`python -m bench.hostile --checkout <other checkout>` prints the same cases' figures for any
version of the exporter.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from bench import hostile
from exporter.config import Settings
from exporter.providers.kit.labels import MAX_LABEL_LENGTH
from exporter.providers.kit.wire import unwire, wire_bytes
from exporter.server import build_app
from exporter.simulator import RunningSimulator, Simulator, running
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_jobs import SimPod
from exporter.simulator.alaya import AlayaWorld
from exporter.simulator.core import raw
from tests.conftest import REPO
from tests.scrape_helpers import until_ready
from tests.target_helpers import TEST_POOL, aihc_target, alaya_target

FAST = {"requests_per_second": "unlimited", "retries": 0, "timeout": 10}
# What the oversized cases may cost: the exporter idles at ~54 MiB, and chunked replies are
# held up to max_reply_bytes (8 MiB) each, 8 in flight: measured peaks 53 MiB (declared) and
# 116 MiB (chunked); main reached 752 MiB for one 30 MB reply and 2 GiB in 12 s for 22 x 300 MB.
RSS_BOUND_MIB = 200


@dataclass
class Scrape:
    text: str
    samples: list[tuple[str, dict[str, str], float]]

    def value(self, name: str, **labels: str) -> float | None:
        for found, got, value in self.samples:
            if found == name and all(got.get(k) == v for k, v in labels.items()):
                return value
        return None

    def named(self, name: str, **labels: str) -> list[dict[str, str]]:
        return [
            got
            for found, got, _ in self.samples
            if found == name and all(got.get(k) == v for k, v in labels.items())
        ]

    def duplicates(self) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
        seen = Counter((name, tuple(sorted(got.items()))) for name, got, _ in self.samples)
        return [key for key, n in seen.items() if n > 1]


async def first_scrape(settings: Settings) -> Scrape:
    """Start the whole exporter, wait until it is ready (every target's first poll, rendered),
    scrape it, stop it."""
    app = build_app(settings)
    async with TestClient(TestServer(app)) as client:
        await until_ready(client)
        response = await client.get("/metrics")
        assert response.status == 200
        text = await response.text()
    samples = [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]
    return Scrape(text, samples)


def assert_promtool_clean(text: str) -> None:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.skip("promtool not installed")
    done = subprocess.run(
        [tool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60
    )
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert done.returncode == 0 and not output.strip(), output[:2000]


def requests(scrape: Scrape, provider: str, endpoint: str, code: str) -> float:
    labels = {"provider": provider, "endpoint": endpoint, "code": code}
    return scrape.value("training_exporter_api_requests_total", **labels) or 0.0


# -- oversized replies ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "refused"),
    [("oversized-30MB", 1), ("oversized-22x300MB", 22), ("oversized-22x300MB-chunked", 22)],
)
async def test_an_oversized_reply_fails_its_part_with_its_code_and_memory_stays_bounded(
    case: str, refused: int
) -> None:
    (made,) = hostile.cases({case})
    # Retries allowed: a reply too large is not retried (it would be as large again).
    made.aihc["limits"] = {**FAST, "retries": 2}
    outcome = await hostile.run_case(made, REPO, rss_kill_mib=1024)

    assert not outcome.killed
    assert outcome.peak_rss_mib < RSS_BOUND_MIB, outcome.peak_rss_mib
    codes = {
        labels["code"]: value
        for name, labels, value in outcome.samples
        if name == "training_exporter_api_requests_total" and labels["endpoint"] == hostile.METRICS
    }
    assert codes.get("too_large") == refused
    assert made.simulator.log.count(hostile.METRICS) == sum(codes.values()), "retried"
    assert outcome.value("training_exporter_up", target="hostile") == 0
    # Every other part of the job is there.
    assert outcome.value("training_job_status", status="Running") == 1
    assert len([s for s in outcome.samples if s[0] == "training_pod_info"]) >= 2


# -- nested replies -------------------------------------------------------------------------


def _two_provider_simulator() -> Simulator:
    aihc = AihcWorld.fixed(pools={TEST_POOL: ["default"]}, jobs=2, pods_per_job=2)
    alaya = AlayaWorld(seed=4, job_count=1, pods_per_job=2, cards_per_pod=2)
    return Simulator(seed=4, aihc=aihc, alaya=alaya)


def _two_provider_settings(served: RunningSimulator) -> Settings:
    return Settings(
        poll_interval=3600,
        aihc=[aihc_target(served.url, metric_types=["GpuUsage", "CpuUsage"], limits=FAST)],
        alaya=[alaya_target(served.url, served.simulator, types=["gpu", "cpu"], limits=FAST)],
    )


def _resource_series(scrape: Scrape, provider: str) -> int:
    return sum(
        1
        for name, labels, _ in scrape.samples
        if name in ("training_pod_gpu_utilization_ratio", "training_pod_cpu_utilization_ratio")
        and labels["provider"] == provider
    )


@pytest.mark.parametrize(
    ("endpoint", "provider"),
    [
        ("DescribeJobMetrics", "aihc"),
        ("DescribeJob", "aihc"),
        ("events", "aihc"),
        ("DescribeJobs", "aihc"),
        ("gpu-metrics", "alaya"),
        ("basic", "alaya"),
    ],
)
async def test_a_nested_reply_fails_only_its_part_and_is_counted(
    endpoint: str, provider: str
) -> None:
    simulator = _two_provider_simulator()
    simulator.faults.only = frozenset({endpoint})
    simulator.faults.script.append("nested")
    async with running(simulator) as served:
        scrape = await first_scrape(_two_provider_settings(served))

    counted = "DescribeJobEvents" if endpoint == "events" else endpoint
    assert requests(scrape, provider, counted, "error") == 1
    other = "alaya" if provider == "aihc" else "aihc"
    assert scrape.value("training_exporter_up", provider=provider) == 0
    assert scrape.value("training_exporter_up", provider=other) == 1
    # AIHC: 2 jobs x 2 types x 2 pods; Alaya: 2 pods x (2 cards of gpu + cpu).
    full = {"aihc": 8, "alaya": 6}
    lost = {
        "DescribeJobMetrics": 2,  # one job's one type, 2 pods
        "DescribeJobs": 8,  # the list itself: nothing is known on a first poll
        "gpu-metrics": 2,  # one pod's 2 cards
    }.get(endpoint, 0)
    assert _resource_series(scrape, provider) == full[provider] - lost
    assert _resource_series(scrape, other) == full[other]
    pods = {"DescribeJob": 2, "DescribeJobs": 4, "basic": 1}.get(endpoint, 0)
    assert len(scrape.named("training_pod_info")) == 4 + 2 - pods
    if endpoint == "events":
        jobs_with_events = {s["job_id"] for s in scrape.named("training_job_events_total")}
        assert len(jobs_with_events) == 1


# -- odd strings ----------------------------------------------------------------------------


async def test_colliding_and_invalid_strings_make_no_duplicate_series_and_a_clean_exposition() -> (
    None
):
    simulator = hostile.strings_simulator()
    assert simulator.aihc is not None
    async with running(simulator) as served:
        scrape = await first_scrape(
            Settings(
                poll_interval=3600,
                aihc=[
                    aihc_target(
                        served.url,
                        resource_pool_id=hostile.POOL,
                        metric_types=["GpuUsage"],
                        limits=FAST,
                    )
                ],
                alaya=[alaya_target(served.url, simulator, types=["gpu"], limits=FAST)],
            )
        )

    assert scrape.duplicates() == []
    assert scrape.value("training_exporter_duplicate_series", provider="aihc") == 0
    assert_promtool_clean(scrape.text)
    assert scrape.value("training_exporter_up", provider="aihc") == 1
    assert scrape.value("training_exporter_up", provider="alaya") == 1
    longest = max(len(v) for _, labels, _ in scrape.samples for v in labels.values())
    assert longest == MAX_LABEL_LENGTH
    # Two job ids with a common 1,024-character prefix stay two jobs.
    long_ids = {s["job_id"] for s in scrape.named("training_job_info") if len(s["job_id"]) > 100}
    assert len(long_ids) == 2
    # Lone surrogates in statuses, phases and event reasons: distinct, valid, marked.
    odd = {s["status"] for s in scrape.named("training_job_status") if "Weird" in s["status"]}
    assert len(odd) == 2 and all(s.startswith("Weird\ufffd~") for s in odd)
    phases = {s["phase"] for s in scrape.named("training_pod_phase") if "\ufffd" in s["phase"]}
    assert len(phases) == 2
    reasons = {s["reason"] for s in scrape.named("training_job_events_total")}
    assert len({r for r in reasons if r.startswith("Odd\ufffd~")}) == 2
    # An invalid byte in a pod name no longer refuses the reply: both pods are exported.
    pods = {s["pod"] for s in scrape.named("training_pod_info") if s["pod"].startswith("pod-")}
    assert "pod-ok" in pods and any(p.startswith("pod-\ufffd~") for p in pods)
    # Alaya: the 100,000-character gpuName is bounded; -1, 12345 and 1_000 are not ratios.
    gpus = {s["gpu"] for s in scrape.named("training_pod_gpu_utilization_ratio", provider="alaya")}
    assert len(gpus) == 4 and max(len(g) for g in gpus) == MAX_LABEL_LENGTH
    for name, labels, value in scrape.samples:
        if name.endswith("_ratio"):
            assert 0.0 <= value <= 1.0, (name, labels, value)
    dropped = {
        labels["reason"]: value
        for name, labels, value in scrape.samples
        if name == "training_exporter_dropped_values_total" and labels["provider"] == "alaya"
    }
    assert dropped == {"out_of_range": 2, "unparsable": 1}


async def test_two_targets_on_one_pool_export_each_series_once_and_count_the_rest() -> None:
    simulator = _two_provider_simulator()
    async with running(simulator) as served:
        targets = [
            aihc_target(served.url, name=name, metric_types=["GpuUsage"], limits=FAST)
            for name in ("pool-a", "pool-b")
        ]
        scrape = await first_scrape(Settings(poll_interval=3600, aihc=targets))

    assert scrape.duplicates() == []
    data = [s for s in scrape.samples if not s[0].startswith("training_exporter_")]
    assert data
    # pool-b exports exactly what pool-a does: every one of its samples was a duplicate.
    assert scrape.value("training_exporter_duplicate_series", provider="aihc") == len(data)


# -- any strings in any name field ----------------------------------------------------------


def _canonical(text: str) -> str:
    # A surrogate pair is one character once it has been through JSON: make it one here.
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    # Escaped bytes that together are valid UTF-8 ('\udcc2\udc80' is U+0080) are what
    # upstream sends as that character: no reply can carry the escaped form.
    return unwire(wire_bytes(text))


_piece = st.one_of(
    st.text(max_size=5),
    st.sampled_from(['"', "\\", "\n", "\\n", "{", "}", ",", "=", "\x00", "\ufffd", "~", "/"]),
    st.integers(0xD800, 0xDFFF).map(chr),  # lone surrogates; U+DC80-U+DCFF go out as raw bytes
    st.binary(min_size=1, max_size=3).map(raw),  # arbitrary bytes, valid UTF-8 or not
    st.just("x" * (MAX_LABEL_LENGTH + 10)),
)
_any_name = st.lists(_piece, max_size=3).map("".join).map(_canonical)
# Names for Alaya's paths come from the configuration: any valid string, not empty.
_config_name = st.text(min_size=1, max_size=8).filter(lambda s: s.strip("./") != "")


_lone = st.integers(0xD800, 0xDFFF).map(chr)
# What the composites below draw from, made once where it does not depend on a draw: a
# strategy made inside a composite is made, validated and labelled again at every draw.
_variant_ends = st.one_of(_lone, _piece)
_one_to_three = st.integers(1, 3)
_zero_to_three = st.integers(0, 3)


@st.composite
def _names(draw: st.DrawFn, strategy: st.SearchStrategy[str], size: int) -> list[str]:
    """`size` names, many of them variants of each other that a lossy cleaner would merge:
    the same text with another lone surrogate or invalid byte, or past the length bound."""
    found: list[str] = []
    for _ in range(size):
        if found and draw(st.booleans()):
            base = draw(st.sampled_from(found))
            if draw(st.booleans()):
                base = "x" * MAX_LABEL_LENGTH + base
            found.append(base + draw(_variant_ends))
        else:
            found.append(draw(strategy))
    return [_canonical(name) for name in found]


_six_names = _names(_any_name, 6)
_pod_names = {n: _names(_config_name, n) for n in (1, 2, 3)}


@st.composite
def _worlds(draw: st.DrawFn) -> dict[str, Any]:
    """Names for every name field of both providers, drawn from a few (so that one family
    often holds two variants of one name)."""
    names = draw(_six_names)
    picks = st.sampled_from(names)
    # Not "." or "..": no HTTP stack keeps those as a path segment.
    job_ids = picks.filter(lambda s: s not in ("", ".", ".."))

    def pick() -> str:
        return draw(picks)

    return {
        "jobs": [
            {
                "job_id": draw(job_ids),
                "fields": {f: pick() for f in ("name", "queue", "user_id", "image")},
                # Mostly running, so that its pods, metrics and events are read too.
                "status": draw(st.sampled_from(["Running", "Running", pick()])),
                "pods": [
                    {"name": pick() or "p", "fields": [pick() for _ in range(4)]}
                    for _ in range(draw(_one_to_three))
                ],
                "events": [(pick(), pick()) for _ in range(draw(_zero_to_three))],
            }
            for _ in range(draw(_one_to_three))
        ],
        "alaya_pods": draw(_pod_names[draw(_one_to_three)]),
        "alaya_job": draw(_config_name),
        "gpu_names": [pick() for _ in range(draw(_one_to_three))],
        "basic": [pick() for _ in range(4)],
    }


def _fill(simulator: Simulator, drawn: dict[str, Any]) -> None:
    aihc, alaya = simulator.aihc, simulator.alaya
    assert aihc is not None and alaya is not None
    aihc.jobs.clear()
    for job in drawn["jobs"]:
        pods = [
            SimPod(p["name"], replica_type=p["fields"][0], node=p["fields"][1], ip=p["fields"][2])
            for p in job["pods"]
        ]
        for pod, spec in zip(pods, job["pods"], strict=True):
            pod.phase = spec["fields"][3]
        made = aihc.add_job(job_id=job["job_id"], queue=job["fields"]["queue"], pods=pods)
        made.name, made.user_id, made.image = (
            job["fields"][k] for k in ("name", "user_id", "image")
        )
        made.status = job["status"]
        made.event_items = [
            {
                "type": kind,
                "reason": reason,
                "count": 1,
                "lastTimestamp": "2026-08-01 10:00:00 +0000 UTC",
            }
            for kind, reason in job["events"]
        ]
    alaya.jobs.clear()
    alaya.add_job(drawn["alaya_pods"], job_id=drawn["alaya_job"])
    alaya.gpu_names = drawn["gpu_names"]
    status, host, host_ip, pod_ip = drawn["basic"]
    alaya.basic_overrides = {
        (drawn["alaya_job"], pod): {
            "status": status,
            "hostName": host,
            "hostIp": host_ip,
            "podIp": pod_ip,
        }
        for pod in drawn["alaya_pods"]
    }


@pytest.fixture
async def shared_simulator() -> Any:
    simulator = Simulator(
        seed=9,
        aihc=AihcWorld.fixed(pools={TEST_POOL: ["default"]}, jobs=0),
        alaya=AlayaWorld(seed=9, job_count=0),
    )
    async with running(simulator) as served:
        yield served


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=_worlds())
async def test_any_strings_in_any_name_field_give_a_clean_exposition(
    shared_simulator: RunningSimulator, drawn: dict[str, Any]
) -> None:
    simulator = shared_simulator.simulator
    _fill(simulator, drawn)
    scrape = await first_scrape(
        Settings(
            poll_interval=3600,
            aihc=[aihc_target(shared_simulator.url, metric_types=["GpuUsage"], limits=FAST)],
            alaya=[alaya_target(shared_simulator.url, simulator, types=["gpu"], limits=FAST)],
        )
    )

    assert scrape.duplicates() == []
    # ... and not because the exposition's last guard dropped any: cleaning merged no names.
    for provider in ("aihc", "alaya"):
        assert scrape.value("training_exporter_duplicate_series", provider=provider) == 0
    assert_promtool_clean(scrape.text)
    for _, labels, _ in scrape.samples:
        assert all(len(value) <= MAX_LABEL_LENGTH for value in labels.values())
    # Names never make a call fail: every request found its job and pod.
    assert scrape.value("training_exporter_up", provider="aihc") == 1
    assert scrape.value("training_exporter_up", provider="alaya") == 1
    # Every listed job is exported (odd names are never a reason to refuse the list).
    assert len(scrape.named("training_job_info", provider="aihc")) == len(
        {j["job_id"] for j in drawn["jobs"]}
    )
