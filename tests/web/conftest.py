"""The status pages' fixtures: the exporter served on a real socket, polling the simulator,
and Debian's chromium, headless, driven by its chromedriver (never a downloaded browser)."""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
import pytest
from aiohttp import web

from exporter.config import Settings
from exporter.server import STATE, ExporterState, build_app
from exporter.web import RequestGuard, WebConfig

if TYPE_CHECKING:  # selenium's driver is imported only where a browser starts (0.4 CPU-s)
    from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1600,1000",
)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """One headless chromium for the session, with a fresh profile."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: run .ci/install-tools (Debian's chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


@dataclass
class Served:
    url: str
    state: ExporterState
    # What a client sends and trusts when the web config asks for basic auth and TLS.
    headers: dict[str, str] = field(default_factory=dict)
    ssl: ssl.SSLContext | None = None

    async def get(self, path: str, **headers: str) -> tuple[int, dict[str, str], str]:
        async with aiohttp.ClientSession() as session:
            return await self._get(session, path, headers)

    async def _get(
        self, session: aiohttp.ClientSession, path: str, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], str]:
        async with session.get(
            self.url + path, headers={**self.headers, **headers}, ssl=self.ssl or True
        ) as response:
            return response.status, dict(response.headers), await response.text()

    async def json(self, path: str) -> Any:
        async with aiohttp.ClientSession() as session:
            return await self._json(session, path)

    async def _json(self, session: aiohttp.ClientSession, path: str) -> Any:
        status, _, body = await self._get(session, path, {})
        assert status == 200, body
        return json.loads(body)

    async def wait_for(
        self, check: Callable[[dict[str, Any]], bool], timeout: float = 20.0
    ) -> dict[str, Any]:
        """The first `/status.json` target document `check` accepts (polled every 0.1 s over
        one kept-alive connection, not slept)."""
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        async with aiohttp.ClientSession() as session:
            while time.monotonic() < deadline:
                for target in (await self._json(session, "/status.json"))["targets"]:
                    last = target
                    if check(target):
                        return target
                await asyncio.sleep(0.1)
        raise AssertionError(f"no target came to that state: {json.dumps(last)[:2000]}")


@asynccontextmanager
async def serving(settings: Settings, config: WebConfig | None = None) -> AsyncIterator[Served]:
    """The whole exporter on a free loopback port, behind `config` when given (its TLS
    context on the listener, as the CLI puts it)."""
    guard = RequestGuard(config) if config is not None else None
    app: web.Application = build_app(settings, request_guard=guard)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        tls = config.ssl_context() if config is not None else None
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = runner.addresses[0][1]
        yield Served(f"{'https' if tls else 'http'}://127.0.0.1:{port}", app[STATE])
    finally:
        await runner.cleanup()


async def load(browser: WebDriver, url: str) -> float:
    """Open `url` in the browser without blocking the loop that serves it; seconds taken."""
    started = time.perf_counter()
    await asyncio.to_thread(browser.get, url)
    return time.perf_counter() - started
