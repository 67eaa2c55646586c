"""Live reload: SIGHUP through the real CLI (the configuration and the web config file), POST
/-/reload through the app, refusals."""

from __future__ import annotations

import asyncio
import base64
import json
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import Settings, load_settings
from exporter.server import STATE, build_app
from exporter.simulator import RunningSimulator, Simulator, running
from exporter.simulator.aihc import DEMO_ACCESS_KEY_ID, DEMO_SECRET_ACCESS_KEY, AihcWorld
from tests.conftest import listening, start_exporter

POOLS = {"cce-a": ["q"], "cce-b": ["q"], "cce-c": ["q"]}
Series = list[tuple[str, dict[str, str], float]]


@pytest.fixture
async def pools() -> AsyncIterator[RunningSimulator]:
    world = AihcWorld.fixed(seed=8, pools=POOLS, jobs=6, pods_per_job=1)
    async with running(Simulator(seed=8, aihc=world)) as served:
        yield served


def target(name: str, url: str, pool: str, secret_file: Path, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "endpoint": url,
        "access_key_id": DEMO_ACCESS_KEY_ID,
        "secret_access_key_file": str(secret_file),
        "resource_pool_id": pool,
        "metric_types": ["GpuUsage"],
        "events": False,
        "limits": {"requests_per_second": 1000},
        **extra,
    }


def parse(text: str) -> Series:
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def value(series: Series, name: str, **labels: str) -> float | None:
    for found, got, v in series:
        if found == name and all(got.get(k) == x for k, x in labels.items()):
            return v
    return None


def targets_up(series: Series) -> dict[str, float]:
    return {labels["target"]: v for name, labels, v in series if name == "training_exporter_up"}


def pools_exported(series: Series) -> set[str]:
    return {labels["resource_pool"] for name, labels, _ in series if name == "training_job_info"}


async def until(scrape: Callable[[], Any], check: Callable[[Series], bool], timeout: float = 15):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while True:
        series = await scrape()
        if check(series):
            return series
        assert time.monotonic() < deadline, series
        await asyncio.sleep(0.1)


@pytest.mark.timeout(120)
async def test_sighup_adds_removes_changes_and_refuses_through_the_cli(
    pools: RunningSimulator, tmp_path: Path
) -> None:
    secret = tmp_path / "sk"
    secret.write_text(DEMO_SECRET_ACCESS_KEY)
    url = pools.url

    def config(*targets: dict[str, Any]) -> str:
        document = {
            "poll_interval": "1s",
            "web": {"listen_address": "127.0.0.1:0"},
            "aihc": list(targets),
        }
        return yaml.safe_dump(document)

    path = tmp_path / "exporter.yaml"
    path.write_text(config(target("a", url, "cce-a", secret), target("b", url, "cce-b", secret)))
    log = tmp_path / "exporter.log"
    process = start_exporter(path, log)
    try:
        base = await listening(process, log)
        async with aiohttp.ClientSession() as session:

            async def scrape() -> Series:
                async with session.get(f"{base}/metrics") as reply:
                    return parse(await reply.text())

            # The self-metrics are current at each scrape, the store's series as of its last
            # rendering (made in a thread): both are waited for, the pools as well as `up`.
            before = await until(
                scrape,
                lambda s: (
                    targets_up(s) == {"a": 1.0, "b": 1.0}
                    and pools_exported(s) == {"cce-a", "cce-b"}
                ),
            )
            a_polls = value(before, "training_exporter_poll_duration_seconds_count", target="a")
            assert a_polls is not None and a_polls >= 1

            # b goes, c comes, a polls every 2 s.
            path.write_text(
                config(
                    target("a", url, "cce-a", secret, poll_interval="2s"),
                    target("c", url, "cce-c", secret),
                )
            )
            process.send_signal(signal.SIGHUP)

            def reloaded(s: Series) -> bool:
                interval = value(
                    s, "training_exporter_tier_interval_seconds", target="a", tier="fast"
                )
                up = targets_up(s) == {"a": 1.0, "c": 1.0}
                return up and interval == 2.0 and pools_exported(s) == {"cce-a", "cce-c"}

            after = await until(scrape, reloaded)
            assert value(after, "training_exporter_tier_interval_seconds", target="b") is None
            # a kept its counters: nothing reset to 0.
            kept = value(after, "training_exporter_poll_duration_seconds_count", target="a")
            assert kept is not None and kept >= a_polls
            assert value(after, "training_exporter_config_last_reload_successful") == 1.0
            succeeded = value(
                after, "training_exporter_config_last_reload_success_timestamp_seconds"
            )

            # A configuration that does not validate is refused; the running one stays.
            path.write_text(config(target("a", url, "cce-a", secret, no_such_key=1)))
            process.send_signal(signal.SIGHUP)
            refused = await until(
                scrape, lambda s: value(s, "training_exporter_config_last_reload_successful") == 0
            )
            assert targets_up(refused) == {"a": 1.0, "c": 1.0}
            assert (
                value(refused, "training_exporter_config_last_reload_success_timestamp_seconds")
                == succeeded
            )
            lines = [json.loads(line) for line in log.read_text().splitlines()]
            problems = [e["problem"] for e in lines if "reload refused" in e.get("event", "")]
            assert problems == ["aihc[0].no_such_key: unknown key"]

            # Secrets from *_file are read again: a wrong key now is refused by the provider.
            secret.write_text("a-wrong-secret-key")
            path.write_text(config(target("a", url, "cce-a", secret)))
            process.send_signal(signal.SIGHUP)
            await until(scrape, lambda s: targets_up(s).get("a") == 0.0)
        assert "a-wrong-secret-key" not in log.read_text()
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
        assert "Traceback" not in log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


async def test_sighup_reads_the_web_config_again_and_refuses_a_bad_one(
    pools: RunningSimulator, tmp_path: Path
) -> None:
    secret = tmp_path / "sk"
    secret.write_text(DEMO_SECRET_ACCESS_KEY)
    path = tmp_path / "exporter.yaml"
    document = {
        "poll_interval": "1s",
        "web": {"listen_address": "127.0.0.1:0"},
        "aihc": [target("a", pools.url, "cce-a", secret)],
    }
    path.write_text(yaml.safe_dump(document))

    def users(password: bytes) -> str:
        hashed = bcrypt.hashpw(password, bcrypt.gensalt(rounds=4)).decode()
        return yaml.safe_dump({"basic_auth_users": {"prom": hashed}})

    web_config = tmp_path / "web.yaml"
    web_config.write_text(users(b"one"))
    log = tmp_path / "exporter.log"
    process = start_exporter(path, log, "--web.config.file", str(web_config))
    try:
        base = await listening(process, log)
        async with aiohttp.ClientSession() as session:

            def basic(password: str) -> dict[str, str]:
                token = base64.b64encode(f"prom:{password}".encode()).decode()
                return {"Authorization": f"Basic {token}"}

            async def status(password: str) -> int:
                async with session.get(f"{base}/metrics", headers=basic(password)) as reply:
                    return reply.status

            async def scrape() -> Series:
                async with session.get(f"{base}/metrics", headers=basic("two")) as reply:
                    return parse(await reply.text())

            assert (await status("one"), await status("two")) == (200, 401)
            web_config.write_text(users(b"two"))
            process.send_signal(signal.SIGHUP)
            deadline = time.monotonic() + 15
            while await status("two") != 200:
                assert time.monotonic() < deadline, log.read_text()
                await asyncio.sleep(0.1)
            assert await status("one") == 401, "the old password goes with the reload"
            # A web config that does not validate is refused; the running one stays.
            web_config.write_text(yaml.safe_dump({"basic_auth_users": {"prom": "plain"}}))
            process.send_signal(signal.SIGHUP)
            refused = await until(
                scrape, lambda s: value(s, "training_exporter_config_last_reload_successful") == 0
            )
            assert targets_up(refused) == {"a": 1.0}
            assert (await status("one"), await status("two")) == (401, 200)
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        problems = [e["problem"] for e in lines if "reload refused" in e.get("event", "")]
        assert len(problems) == 1 and problems[0].startswith("web.config.file: basic_auth_users")
        assert "plain" not in problems[0]
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


@pytest.fixture
def app_factory(aiohttp_client: Callable[..., Any], pools: RunningSimulator, tmp_path: Path):  # type: ignore[no-untyped-def]
    secret = tmp_path / "sk"
    secret.write_text(DEMO_SECRET_ACCESS_KEY)
    path = tmp_path / "exporter.yaml"

    def write(*names: str, lifecycle: bool = True, broken: bool = False) -> None:
        document: dict[str, Any] = {
            "poll_interval": "1s",
            "web": {"enable_lifecycle": lifecycle},
            "aihc": [target(n, pools.url, f"cce-{n}", secret) for n in names],
        }
        if broken:
            document["poll_interval"] = "soon"
        path.write_text(yaml.safe_dump(document))

    async def make(*names: str, lifecycle: bool = True) -> tuple[Any, Callable[..., None]]:
        write(*names, lifecycle=lifecycle)
        settings: Settings = load_settings(path)
        app = build_app(settings, load=lambda: load_settings(path))
        client = await aiohttp_client(app)
        assert await app[STATE].scheduler.wait_ready(20)
        return client, write

    return make


async def test_post_reload_adds_and_removes_targets(app_factory) -> None:  # type: ignore[no-untyped-def]
    client, write = await app_factory("a", "b")
    write("a", "c")
    reply = await client.post("/-/reload")
    assert reply.status == 200, await reply.text()
    runners = client.app[STATE].scheduler.runners
    assert sorted(r.labels[1] for r in runners) == ["a", "c"]

    async def scrape() -> Series:
        return parse(await (await client.get("/metrics")).text())

    after = await until(scrape, lambda s: pools_exported(s) == {"cce-a", "cce-c"})
    assert set(targets_up(after)) == {"a", "c"}


async def test_a_bad_reload_answers_500_and_the_old_targets_stay(app_factory) -> None:  # type: ignore[no-untyped-def]
    client, write = await app_factory("a")
    write("a", "b", broken=True)
    reply = await client.post("/-/reload")
    assert reply.status == 500
    assert "poll_interval: not a duration" in await reply.text()
    series = parse(await (await client.get("/metrics")).text())
    assert value(series, "training_exporter_config_last_reload_successful") == 0
    assert set(targets_up(series)) == {"a"}


async def test_the_lifecycle_endpoint_is_refused_without_the_flag(app_factory) -> None:  # type: ignore[no-untyped-def]
    client, write = await app_factory("a", lifecycle=False)
    write("a", "b", lifecycle=False)
    reply = await client.post("/-/reload")
    assert reply.status == 403
    assert await reply.text() == "Lifecycle API is not enabled.\n"
    assert [r.labels[1] for r in client.app[STATE].scheduler.runners] == ["a"]
    assert (await client.get("/-/reload")).status == 405
