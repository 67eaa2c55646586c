"""The status pages over HTTP: no secret in any of them, every one behind the web config,
never a rendering of the exposition, bounded queries, and what they say about a target."""

from __future__ import annotations

import html
import itertools
import json
import re
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import bcrypt
import pytest
import trustme
from aiohttp import web
from pydantic import SecretStr

from bench.synthetic import ListedProvider
from exporter.config import Settings
from exporter.model import JobData, Part, Sample, TargetSnapshot
from exporter.providers.alaya import AlayaJob, AlayaTarget
from exporter.selfmetrics import SelfMetrics
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import (
    DEMO_ACCESS_KEY_ID,
    DEMO_SECRET_ACCESS_KEY,
    SECRET_MARK,
    AihcWorld,
)
from exporter.simulator.alaya import DEMO_API_KEY
from exporter.store import SnapshotStore
from exporter.web import load_web_config
from exporter.web.markup import REFRESH
from exporter.web.status_view import LATE_INTERVALS, MAX_LIMIT, jobs_document, target_document
from exporter.work.runner import TargetRunner
from tests.conftest import REPO
from tests.scrape_helpers import Renders, current
from tests.target_helpers import aihc_target
from tests.web.conftest import Served, serving

PASSWORD = "correct horse battery staple"
# A budget the simulator answers at once: a target is up once every item was read.
FAST = {"requests_per_second": 1000, "max_concurrency": 4}
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


def pages(target: str) -> list[str]:
    base = f"/targets/{target}"
    return [
        "/",
        "/status.json",
        f"{base}/jobs",
        f"{base}/jobs.json",
        f"{base}/jobs?offset=0&limit={MAX_LIMIT}",
        f"{base}/calls",
        f"{base}/calls.json",
    ]


@asynccontextmanager
async def upstream(
    answer: Callable[[web.Request], Awaitable[web.Response]],
) -> AsyncIterator[str]:
    """A provider on a free loopback port that answers every request with `answer`."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def echoing_upstream() -> AsyncIterator[str]:
    """A provider that fails every call with a message repeating what it was sent: the
    request line with its query and the Authorization header."""

    async def answer(request: web.Request) -> web.Response:
        authorization = request.headers.get("Authorization")
        sent = f"{request.method} {request.path_qs} Authorization: {authorization}"
        body = {"code": "InternalError", "message": f"you sent {sent}", "requestId": "echo-1"}
        return web.json_response(body, status=500)

    async with upstream(answer) as url:
        yield url


async def test_no_secret_of_the_config_appears_in_any_page_or_json(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(tmp_path / "s.pem")
    web_yml = tmp_path / "web.yml"
    web_yml.write_text(
        f"tls_server_config: {{cert_file: s.pem, key_file: s.pem}}\n"
        f"basic_auth_users: {{alice: '{HASH}'}}\n",
        encoding="utf-8",
    )
    config = load_web_config(web_yml)
    world = AihcWorld.fixed(jobs=3)
    async with running(Simulator(seed=7, aihc=world)) as sim, echoing_upstream() as echo:
        settings = Settings(
            aihc=[
                aihc_target(sim.url, name="good"),
                aihc_target(echo, name="echoed", limits={"retries": 0}),
            ],
            alaya=[
                AlayaTarget(
                    name="echoed-alaya",
                    endpoint=echo,
                    api_key=SecretStr(DEMO_API_KEY),
                    jobs=[AlayaJob(id="job-1", pods=["pod-1"])],
                    limits={"retries": 0},  # type: ignore[arg-type]
                )
            ],
            poll_interval=3600,
        )
        async with serving(settings, config) as served:
            served.ssl = ca_context(ca)
            served.headers["Authorization"] = aiohttp.encode_basic_auth("alice", PASSWORD)
            await served.wait_for(lambda t: t["target"] == "good" and t["jobs"] > 0)
            await served.wait_for(lambda t: t["target"] == "echoed" and t["last_error"])
            await served.wait_for(lambda t: t["target"] == "echoed-alaya" and t["last_error"])
            texts = [
                (await served.get(path))[2]
                for target in ("good", "echoed", "echoed-alaya")
                for path in pages(target)
            ]
    assert any("you sent" in t for t in texts), "the echoing provider's message is shown"
    secrets = (
        DEMO_ACCESS_KEY_ID,
        DEMO_SECRET_ACCESS_KEY,
        DEMO_API_KEY,
        HASH,
        HASH[7:29],  # the salt
        PASSWORD,
        SECRET_MARK,
        "bce-auth-v1/" + DEMO_ACCESS_KEY_ID,
    )
    for text in texts:
        for secret in secrets:
            assert secret not in text, (secret, text[:300])
        # No signature either: what follows the signed headers of an echoed header.
        assert not re.search(r"host;[a-z-;]+/[0-9a-f]{16}", text), text


# A secret key with characters that JSON, URLs and HTML each spell otherwise.
ECHOED_KEY = "sk/Live+Echo&0123456789=<key>"


def echo_forms(key: str) -> list[str]:
    """The messages of a gateway echoing the caller's secret key, one per call, in turn:
    plain, inside echoed JSON (escaped), percent-encoded, HTML-escaped, cut off in the middle
    of the key, and as the request id."""
    return [
        f"signature mismatch for secret {key}",
        "you sent " + json.dumps({"secretAccessKey": key}),
        f"bad credential {urllib.parse.quote(key, safe='')}",
        f"<p>bad key {html.escape(key)}</p>",
        f"bad key {key[:12]}",
    ]


@asynccontextmanager
async def key_echoing_upstream(key: str) -> AsyncIterator[str]:
    """A BCE-style gateway that fails every call with a message repeating the secret key."""
    forms = echo_forms(key)
    calls = itertools.count()

    async def answer(request: web.Request) -> web.Response:
        n = next(calls)
        message = forms[n % len(forms)]
        request_id = key if n % len(forms) == 0 else f"echo-{n}"
        body = {"code": "SignatureDoesNotMatch", "message": message, "requestId": request_id}
        return web.json_response(body, status=403 if n % 2 else 500)

    async with upstream(answer) as url:
        yield url


async def test_a_gateway_echoing_the_secret_key_shows_its_error_and_never_the_key() -> None:
    async with key_echoing_upstream(ECHOED_KEY) as echo:
        target = aihc_target(
            echo, name="echo", secret_access_key=SecretStr(ECHOED_KEY), limits={"retries": 0}
        )
        async with serving(Settings(aihc=[target], poll_interval=0.2)) as served:
            # Every form of the echo has been answered and recorded.
            await served.wait_for(lambda t: t["failed_since_success"] >= 2 * len(echo_forms("")))
            texts = {path: (await served.get(path))[2] for path in pages("echo")}
    for path in ("/", "/status.json", "/targets/echo/calls", "/targets/echo/calls.json"):
        assert "SignatureDoesNotMatch" in texts[path], path
    shown = " ".join(texts.values())
    assert "signature mismatch" in shown and "bad key" in shown
    spellings = (
        ECHOED_KEY,
        json.dumps(ECHOED_KEY)[1:-1],
        urllib.parse.quote(ECHOED_KEY, safe=""),
        html.escape(ECHOED_KEY),
        ECHOED_KEY[:12],
    )
    for path, text in texts.items():
        for spelling in spellings:
            assert spelling not in text, (path, spelling)
        assert "0123456789" not in text, (path, text[:500])


async def test_a_reload_keeps_the_calls_and_errors_the_pages_show() -> None:
    simulator = Simulator(seed=7, aihc=AihcWorld.fixed(jobs=3))
    simulator.faults.error_rates = {500: 1.0}
    async with running(simulator) as sim:
        target = aihc_target(sim.url, name="pool", limits={"retries": 0})
        settings = Settings(aihc=[target], poll_interval=3600)
        async with serving(settings) as served:
            before = await served.wait_for(lambda t: t["state"] == "down")
            calls = await served.json("/targets/pool/calls.json")
            # A changed target is rebuilt: a new client, a new runner.
            changed = target.model_copy(update={"metric_types": ["GpuUsage"]})
            assert await served.state.apply(settings.model_copy(update={"aihc": [changed]}))
            after = (await served.json("/status.json"))["targets"][0]
            calls_after = await served.json("/targets/pool/calls.json")
    assert (after["state"], after["since"]) == ("down", before["since"])
    assert after["last_error"] is not None
    assert calls_after["total"] >= calls["total"]
    kept = {(f["at"], f["message"]) for f in calls_after["failures"]}
    assert {(f["at"], f["message"]) for f in calls["failures"]} <= kept


def ca_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


async def test_every_page_is_behind_the_web_config(tmp_path: Path) -> None:
    web_yml = tmp_path / "web.yml"
    web_yml.write_text(f"basic_auth_users: {{alice: '{HASH}'}}\n", encoding="utf-8")
    async with running(Simulator(seed=7, aihc=AihcWorld.fixed(jobs=3))) as sim:
        settings = Settings(aihc=[aihc_target(sim.url, name="pool")], poll_interval=3600)
        async with serving(settings, load_web_config(web_yml)) as served:
            refused = [(p, (await served.get(p))[0]) for p in pages("pool")]
            served.headers["Authorization"] = aiohttp.encode_basic_auth("alice", PASSWORD)
            allowed = [(p, (await served.get(p))[0]) for p in pages("pool")]
    assert refused == [(p, 401) for p in pages("pool")]
    assert allowed == [(p, 200) for p in pages("pool")]


async def test_pages_refresh_without_script_and_forbid_any(served_pool: Served) -> None:
    for path in pages("pool"):
        status, headers, body = await served_pool.get(path)
        assert status == 200
        assert "script-src" not in headers["Content-Security-Policy"]
        assert headers["Content-Security-Policy"].startswith("default-src 'none'")
        if not path.endswith(".json"):
            assert f'<meta http-equiv="refresh" content="{REFRESH}">' in body
            assert "<script" not in body


async def test_pages_never_render_the_exposition(
    served_pool: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    await served_pool.get("/metrics")
    # A scrape does not wait for the render under way: the count once the store is rendered.
    await current(served_pool.state.exposition, served_pool.state.store)
    renders = Renders(monkeypatch)
    for _ in range(3):
        for path in pages("pool"):
            assert (await served_pool.get(path))[0] == 200
    assert renders.count == 0


async def test_queries_are_bounded_and_unknown_targets_are_404(served_pool: Served) -> None:
    assert (await served_pool.get("/targets/nope/jobs"))[0] == 404
    assert (await served_pool.get("/targets/nope/calls.json"))[0] == 404
    for query in ("offset=-1", "offset=abc", "limit=1e3", "limit=" + "9" * 10, "offset=٣"):
        status, _, body = await served_pool.get(f"/targets/pool/jobs.json?{query}")
        assert status == 400 and "whole number" in body, query
    doc = await served_pool.json(f"/targets/pool/jobs.json?limit={MAX_LIMIT * 10}")
    assert doc["limit"] == MAX_LIMIT
    doc = await served_pool.json("/targets/pool/jobs.json?limit=0&offset=999999")
    assert (doc["limit"], doc["offset"], doc["jobs"]) == (1, 999999, [])


async def test_a_failed_call_links_to_what_the_provider_answered() -> None:
    simulator = Simulator(seed=7, aihc=AihcWorld.fixed(jobs=3))
    simulator.faults.script.extend([503])
    async with running(simulator) as sim:
        target = aihc_target(sim.url, name="pool", limits=FAST | {"retries": 1})
        async with serving(Settings(aihc=[target], poll_interval=3600)) as served:
            await served.wait_for(lambda t: t["state"] == "up")
            doc = await served.json("/targets/pool/calls.json")
            _, _, page = await served.get("/targets/pool/calls")
    failed = [c for c in doc["calls"] if not c["ok"]]
    assert len(failed) == 1 and failed[0]["failure"] == 0
    assert doc["failures"][0]["status"] == 503
    assert doc["failures"][0]["request_id"] == "sim-fault"
    assert doc["failed_since_success"] == 0
    assert '<a href="#failure-0">' in page and '<tr id="failure-0">' in page
    assert "ServiceUnavailable" in page or "503" in page


@asynccontextmanager
async def _pool() -> AsyncIterator[Served]:
    async with running(Simulator(seed=7, aihc=AihcWorld.fixed(jobs=3))) as sim:
        target = aihc_target(sim.url, name="pool", limits=FAST)
        async with serving(Settings(aihc=[target], poll_interval=3600)) as served:
            await served.wait_for(lambda t: t["state"] == "up")
            yield served


@pytest.fixture
async def served_pool() -> AsyncIterator[Served]:
    async with _pool() as served:
        yield served


# -- what the documents say, on a runner whose snapshot is made by hand ----------------------


def hand_made(ages: dict[str, dict[str, float]]) -> TargetRunner:
    """A runner over a listed provider whose snapshot holds each job's parts read `ages` ago
    (tier -> seconds), with no poll run."""
    store = SnapshotStore()
    runner = TargetRunner(ListedProvider("aihc", "t"), store, SelfMetrics(), budget=None, workers=1)
    now = time.monotonic()
    jobs = {}
    for job_id, tiers in ages.items():
        info = Sample("training_job_info", ("job_id", "job_name"), (job_id, f"name-{job_id}"), 1)
        parts = {f"{tier}-part": Part((info,), now - age, tier) for tier, age in tiers.items()}
        jobs[job_id] = JobData(job_id, parts)
    store.swap(TargetSnapshot("aihc", "t", jobs, now, len(jobs)))
    return runner


def test_a_tier_older_than_late_intervals_is_stale() -> None:
    fast = 60.0
    runner = hand_made({"a": {"fast": fast * (LATE_INTERVALS - 0.1)}})
    assert runner.plan.effective["fast"] == fast
    assert not target_document(runner.status())["stale"]
    runner = hand_made({"a": {"fast": fast * (LATE_INTERVALS + 0.1)}})
    doc = target_document(runner.status())
    assert doc["stale"] and doc["tiers"][0]["late"]
    assert doc["tiers"][0]["oldest_age"] > fast * LATE_INTERVALS


def test_jobs_come_failing_first_then_stalest_against_their_interval() -> None:
    runner = hand_made(
        {
            "fresh": {"fast": 1, "medium": 10},
            # Older in seconds, younger against the medium tier's longer interval.
            "old-medium": {"medium": 200},
            "late-fast": {"fast": 100},
            "failing": {"fast": 1},
        }
    )
    runner.health.jobs.read("failing", "fast", ok=False)
    runner.health.jobs.read("fresh", "fast", ok=True)
    doc = jobs_document(runner.status())
    assert [j["job_id"] for j in doc["jobs"]] == ["failing", "late-fast", "old-medium", "fresh"]
    assert (doc["total"], doc["failing"]) == (4, 1)
    assert doc["jobs"][0]["failing"] and doc["jobs"][0]["tiers"]["fast"]["last_read_failed"]
    assert doc["jobs"][0]["name"] == "name-failing"
    assert [j["job_id"] for j in jobs_document(runner.status(), offset=1, limit=2)["jobs"]] == [
        "late-fast",
        "old-medium",
    ]


async def test_every_field_of_the_json_is_in_its_documented_schema(served_pool: Served) -> None:
    text = (REPO / "docs" / "status-pages.md").read_text(encoding="utf-8")
    documented = {f for path in re.findall(r"`([a-z_.]+)`", text) for f in path.split(".")}
    status = await served_pool.json("/status.json")
    target = status["targets"][0]
    jobs = await served_pool.json("/targets/pool/jobs.json")
    calls = await served_pool.json("/targets/pool/calls.json")
    fields = {
        *status,
        *target,
        *target["budget"],
        *target["tiers"][0],
        *target["links"],
        *jobs,
        *jobs["jobs"][0],
        *next(iter(jobs["jobs"][0]["tiers"].values())),
        *calls,
        *calls["calls"][0],
    }
    assert fields - documented == set()


async def test_refused_credentials_show_as_refused_with_the_provider_s_answer() -> None:
    async with running(Simulator(seed=7, aihc=AihcWorld.fixed(jobs=1))) as sim:
        target = aihc_target(sim.url, name="pool", secret_access_key=SecretStr("not-the-key"))
        async with serving(Settings(aihc=[target], poll_interval=3600)) as served:
            found = await served.wait_for(lambda t: t["state"] == "refused")
            _, _, page = await served.get("/")
    assert found["last_error"]["status"] == 403
    assert found["last_error"]["provider_code"] == "AccessDenied"
    assert '<span class="state refused">refused</span>' in page
    assert '<tr class="bad">' in page
    assert "not-the-key" not in page
