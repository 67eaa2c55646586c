"""The aiohttp application: telemetry path, health, readiness, a landing page and the status
pages (`exporter.web.status_routes`).

The HTTP side around it (TLS, auth, connection limits, the landing page's HTML) is
`exporter.web`.

Start-up builds one provider client per target and starts the scheduler; clean-up stops the
scheduler, which cancels in-flight calls and closes every client session. Scrapes never call
a provider: they serve the cached exposition of the store (see `exporter.collector`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial

import aiohttp.payload
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter

from exporter.collector import Exposition, Payload, SnapshotCollector
from exporter.config import Settings
from exporter.configkit import Limits, TargetBase
from exporter.logs import get_logger
from exporter.providers.base import Provider
from exporter.redaction import redactor
from exporter.reload import Reloader
from exporter.scheduler import Scheduler
from exporter.selfmetrics import SelfMetrics
from exporter.sharding import budget_share, job_filter
from exporter.store import SnapshotStore
from exporter.targets import build_provider
from exporter.web.handler import RequestGuard
from exporter.web.landing_page import landing_page
from exporter.web.status_routes import add_status_routes
from exporter.work.runner import TargetRunner
from exporter.work.runner_status import RunnerStatus

log = get_logger(__name__)

# How long /-/ready waits for the render of the first round, within a Kubernetes probe's
# default 1 s timeout: a small pool's takes milliseconds; 100k series' 0.8-2 s, and a probe
# that comes sooner is answered 503, the next one 200.
READY_WAIT = 0.5


@dataclass
class ExporterState:
    settings: Settings
    store: SnapshotStore = field(default_factory=SnapshotStore)
    metrics: SelfMetrics = field(default_factory=SelfMetrics)
    scheduler: Scheduler | None = None
    providers: list[Provider] = field(default_factory=list)
    exposition: Exposition = field(init=False)

    def __post_init__(self) -> None:
        # Provider text and log lines are masked of the configured secrets (and, after a
        # reload, of the ones before: a gateway refusing an old key echoes that one).
        redactor.add(self.settings.secrets())
        collector = SnapshotCollector(self.store.view, on_duplicates=self.metrics.set_duplicates)
        self.exposition = Exposition(self.store, collector, self.metrics.registry)

    # Providers given up front (tests, benchmarks) instead of built from the targets.
    given_providers: list[Provider] | None = None
    # The runners' clock and sleep: their rounds, schedules and ages run on it.
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    # The store's version when every target was first ready.
    _ready_version: int | None = field(default=None, init=False)

    async def ready(self) -> bool:
        """Every target's first round is over, and scrapes get a rendering that holds it:
        they are served the last complete rendering, which right after the first round can
        still be one made before it."""
        if self.scheduler is None or not self.scheduler.ready:
            return False
        if self._ready_version is None:
            self._ready_version = self.store.view().version
        return await self.exposition.holds(self._ready_version, READY_WAIT)

    def build_scheduler(self) -> Scheduler:
        targets = self.targets(self.settings)
        if self.given_providers is not None:
            self.providers = list(self.given_providers)
        else:
            self.providers = [self.build_provider(t) for t in targets.values()]
        runners = [self.runner(p, targets.get(p.target)) for p in self.providers]
        self.scheduler = Scheduler(runners)
        return self.scheduler

    async def apply(self, settings: Settings) -> list[str]:
        """Run the targets of `settings` from now on; what changed, for the log.

        A target whose configuration is the same keeps running as it is. One that changed
        (or whose shared settings did: poll interval, stale_after, sharding) is rebuilt, but
        its snapshot and its self-metrics stay: no gap, no reset. A removed target's series
        go at once; a new one starts polling."""
        assert self.scheduler is not None
        redactor.add(settings.secrets())
        before, after = self.targets(self.settings), self.targets(settings)
        shared = _shared(settings) != _shared(self.settings)
        self.settings = settings
        changes: list[str] = []
        # Rebuilt runners hand their schedule on: only items not read before are read first.
        rebuilt: dict[str, TargetRunner] = {}
        for runner in list(self.scheduler.runners):
            provider, name = runner.labels
            old, new = before.get(name), after.get(name)
            if new is not None and new == old and not shared:
                continue
            await self.scheduler.remove(runner)
            if new is None or type(new) is not type(old):
                self.store.remove(provider, name)
                self.metrics.forget_target(provider, name)
                changes.append(f"removed {provider}/{name}")
            else:
                rebuilt[name] = runner
        running = {r.labels[1] for r in self.scheduler.runners}
        for name, target in after.items():
            if name in running:
                continue
            built = self.build_provider(target)
            self.scheduler.add(self.runner(built, target, previous=rebuilt.get(name)))
            if name in before and type(before[name]) is type(target):
                changes.append(f"changed {built.provider}/{name}")
            else:
                changes.append(f"added {built.provider}/{name}")
        self.providers = [r.provider for r in self.scheduler.runners]
        return changes

    def poll_interval(self, target: TargetBase | None) -> float:
        given = target.poll_interval if target is not None else None
        return given or self.settings.poll_interval

    @staticmethod
    def targets(settings: Settings) -> dict[str, TargetBase]:
        """The targets by name, each with this replica's share of its request budget."""
        return {t.name: budget_share(t, settings.shard) for t in settings.targets()}

    def build_provider(self, target: TargetBase) -> Provider:
        return build_provider(target, self.metrics, self.poll_interval(target))

    def runner(
        self,
        provider: Provider,
        target: TargetBase | None,
        previous: TargetRunner | None = None,
    ) -> TargetRunner:
        owns = job_filter(self.settings.shard)
        limits = target.limits if target is not None else Limits()
        return TargetRunner(
            provider,
            self.store,
            self.metrics,
            budget=limits.requests_per_second or None,
            workers=limits.max_concurrency,
            stale_after=self.settings.stale_after,
            max_series=target.max_series if target is not None else None,
            owns_job=lambda job_id: owns(provider.provider, job_id),
            clock=self.clock,
            sleep=self.sleep,
            previous=previous,
        )


def _shared(settings: Settings) -> tuple[object, ...]:
    """The settings every runner is built from, beside its own target's."""
    return (settings.poll_interval, settings.stale_after, settings.shard)


STATE: web.AppKey[ExporterState] = web.AppKey("exporter_state", ExporterState)
RELOADER: web.AppKey[Reloader] = web.AppKey("exporter_reloader", Reloader)


def accepts_gzip(accept_encoding: str) -> bool:
    for item in accept_encoding.split(","):
        token, _, params = item.strip().partition(";")
        if token.strip().lower() not in ("gzip", "*"):
            continue
        quality = params.strip().removeprefix("q=")
        if not params or not quality or quality.strip() not in ("0", "0.0", "0.00", "0.000"):
            return True
    return False


async def metrics_handler(request: web.Request) -> web.Response:
    state = request.app[STATE]
    gzip = accepts_gzip(request.headers.get("Accept-Encoding", ""))
    payload = await state.exposition.payload(request.headers.get("Accept", ""), gzip)
    headers = {"Content-Type": payload.content_type, "Vary": "Accept, Accept-Encoding"}
    if payload.gzipped:
        headers["Content-Encoding"] = "gzip"
    return web.Response(body=PayloadBody(payload), headers=headers)


class PayloadBody(aiohttp.payload.Payload):
    """A scrape's reply written in slices of the cached bytes, SLICE at a time.

    A bytes body goes to the transport in one write, which on Python 3.11 joins it with the
    headers and then buffers whatever the socket did not take at once: two copies of the
    exposition per concurrent scrape. Slices through aiohttp's writer wait for the socket
    instead (it drains past 64 KiB). Runs of parts smaller than a quarter slice (a rendering's
    chunks) are joined into one write, so the send calls stay few.

    A client that reads as fast as the reply is written never makes the writer wait, and the
    whole reply would go out in one step of the loop (an identity reply at 400k series, 80 MB:
    a third of a second that no read, publish or other scrape gets). The write lets the loop
    run others after each TURN bytes (a few ms of writing): a gzip reply of up to ~1M series
    goes out in one step, as before. A chunk that keeps no text (above
    `exporter.rendering.TEXT_LIMIT`) is inflated as its turn comes, and its bytes count
    INFLATED times toward a turn: inflating a MiB costs ~4 x writing one, so a turn stays a
    few ms.
    """

    SLICE = 256 * 1024
    TURN = 4 * 1024 * 1024
    INFLATED = 4

    def __init__(self, payload: Payload) -> None:
        super().__init__(payload, content_type=payload.content_type)
        self._payload = payload
        self._size = payload.size

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return b"".join(self._payload.pieces()).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        left = self.TURN

        def inflated(length: int) -> None:
            nonlocal left
            left -= length * (self.INFLATED - 1)

        for piece in slices(self._payload.pieces(inflated), self.SLICE):
            await writer.write(piece)
            left -= len(piece)
            if left <= 0:
                await asyncio.sleep(0)
                left = self.TURN


def slices(parts: Iterable[bytes], size: int) -> Iterator[bytes | memoryview]:
    """`parts` in pieces of at most `size` bytes: big parts cut, runs of small ones (under a
    quarter of `size`) joined."""
    batch: list[memoryview] = []
    held = 0
    for part in parts:
        view = memoryview(part)
        for start in range(0, len(view), size):
            piece = view[start : start + size]
            if len(piece) >= size // 4:
                if batch:
                    yield b"".join(batch)
                    batch, held = [], 0
                yield piece
                continue
            batch.append(piece)
            held += len(piece)
            if held >= size:
                yield b"".join(batch)
                batch, held = [], 0
    if batch:
        yield b"".join(batch)


async def healthy_handler(request: web.Request) -> web.Response:
    return web.Response(text="Healthy\n")


async def reload_handler(request: web.Request) -> web.Response:
    """POST /-/reload, as Prometheus answers it: 403 unless the lifecycle API is enabled,
    500 with the problems when the new configuration is refused."""
    state = request.app[STATE]
    if not state.settings.web.enable_lifecycle:
        return web.Response(status=403, text="Lifecycle API is not enabled.\n")
    reloader = request.app.get(RELOADER)
    if reloader is None:
        return web.Response(status=503, text="This exporter cannot reload its configuration.\n")
    problems = await reloader.reload("POST /-/reload")
    if problems:
        text = "failed to reload config:\n" + "\n".join(problems) + "\n"
        return web.Response(status=500, text=text)
    return web.Response(text="Reloaded.\n")


async def ready_handler(request: web.Request) -> web.Response:
    if await request.app[STATE].ready():
        return web.Response(text="Ready\n")
    return web.Response(status=503, text="Not ready: waiting for the first poll of every target\n")


async def landing_handler(request: web.Request) -> web.Response:
    state = request.app[STATE]
    return landing_page(state.settings.web.telemetry_path, _statuses(state))


def _statuses(state: ExporterState, target: str | None = None) -> list[RunnerStatus]:
    """What the status pages show of every target, or of `target` only."""
    runners = state.scheduler.runners if state.scheduler is not None else []
    return [r.status() for r in runners if target is None or r.labels[1] == target]


async def _start(app: web.Application) -> None:
    state = app[STATE]
    scheduler = state.build_scheduler()
    scheduler.start()
    log.info(
        "exporter started",
        targets=[f"{p.provider}/{p.target}" for p in state.providers],
        poll_interval=state.settings.poll_interval,
    )


async def _stop(app: web.Application) -> None:
    scheduler = app[STATE].scheduler
    if scheduler is not None:
        await scheduler.stop()


def build_app(
    settings: Settings,
    *,
    providers: list[Provider] | None = None,
    load: Callable[[], Settings] | None = None,
    request_guard: RequestGuard | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> web.Application:
    """The exporter as an aiohttp application; `providers` replace those of the targets;
    every route is behind `request_guard`, into which a reload (`load` reads the configuration
    again, `exporter.reload`) puts the web config file read again. The runners keep time
    with `clock` and `sleep`."""
    middlewares = [request_guard.middleware] if request_guard is not None else []
    app = web.Application(middlewares=middlewares)
    state = ExporterState(settings, given_providers=providers, clock=clock, sleep=sleep)
    app[STATE] = state
    if load is not None:
        app[RELOADER] = Reloader(state, load, request_guard)
    app.router.add_post("/-/reload", reload_handler)
    app.router.add_get(settings.web.telemetry_path, metrics_handler)
    app.router.add_get("/-/healthy", healthy_handler)
    app.router.add_get("/-/ready", ready_handler)
    app.router.add_get("/", landing_handler)
    add_status_routes(app, partial(_statuses, state), settings.web.telemetry_path)
    app.on_startup.append(_start)
    app.on_cleanup.append(_stop)
    return app
