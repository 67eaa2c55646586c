"""Command line: `training-job-exporter [flags]`, `… simulate` and `… backfill`.

Flags follow node_exporter's spelling and win over `TJE_` variables and the YAML file. A bad
configuration prints one line per problem to stderr and exits 2, before anything listens.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, Final

from exporter import __version__
from exporter.address import parse_listen_address
from exporter.logs import configure_logging, get_logger
from exporter.providers.registry import titles
from exporter.redaction import redactor

if TYPE_CHECKING:
    from aiohttp import web

    from exporter.config import Settings
    from exporter.web import WebConfig

# What serving needs (aiohttp, the server, structlog) is imported when the exporter starts
# serving, so --help, --version and a configuration's exit 2 do not load it; the configuration
# (pydantic-settings and the settings' models) once the flags are parsed, so `simulate` does
# not load it either.

EXIT_CONFIG = 2
SHUTDOWN_GRACE = 3.0


# Each flag's spellings and argparse keywords, in the order `--help` lists them.
FLAGS: Final[tuple[tuple[tuple[str, ...], dict[str, Any]], ...]] = (
    (
        ("--config", "--config.file"),
        {
            "dest": "config",
            "metavar": "PATH",
            "help": "YAML configuration file (default: config/exporter.yaml)",
        },
    ),
    (
        ("--web.listen-address",),
        {"dest": "listen_address", "metavar": "ADDR", "help": "address to listen on, host:port"},
    ),
    (
        ("--web.telemetry-path",),
        {"dest": "telemetry_path", "metavar": "PATH", "help": "path under which to expose metrics"},
    ),
    (
        ("--web.config.file",),
        {
            "dest": "web_config_file",
            "metavar": "PATH",
            "help": "TLS and basic auth configuration (exporter-toolkit format)",
        },
    ),
    (
        ("--web.enable-lifecycle",),
        {
            "dest": "enable_lifecycle",
            "action": "store_true",
            "default": None,
            "help": "enable POST /-/reload (SIGHUP reloads either way)",
        },
    ),
    (("--log.level",), {"dest": "log_level", "choices": ["debug", "info", "warning", "error"]}),
    (("--log.format",), {"dest": "log_format", "choices": ["json", "console"]}),
    (
        ("--shard.index",),
        {
            "dest": "shard_index",
            "type": int,
            "metavar": "N",
            "help": "this replica's shard, 0-based",
        },
    ),
    (
        ("--shard.count",),
        {
            "dest": "shard_count",
            "type": int,
            "metavar": "N",
            "help": "number of replicas sharing the jobs",
        },
    ),
    (
        ("--demo",),
        {"action": "store_true", "help": "poll each provider's simulated service on loopback"},
    ),
)


def parser() -> argparse.ArgumentParser:
    """The exporter's flags (`FLAGS`, and `--version`)."""
    p = argparse.ArgumentParser(
        prog="training-job-exporter",
        description=f"Prometheus exporter for training jobs on {titles()}. "
        "Subcommands: `simulate` runs the fake provider APIs on their own; `backfill` writes "
        "the history the provider APIs hold as OpenMetrics for promtool.",
    )
    for flags, options in FLAGS:
        p.add_argument(*flags, **options)
    p.add_argument("--version", action="version", version=f"training-job-exporter {__version__}")
    return p


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, as a nested mapping of configuration keys."""
    overrides: dict[str, Any] = {}

    def put(section: str | None, key: str, value: object) -> None:
        if value is None:
            return
        target = overrides.setdefault(section, {}) if section else overrides
        target[key] = value

    put("web", "listen_address", args.listen_address)
    put("web", "telemetry_path", args.telemetry_path)
    put("web", "config_file", args.web_config_file)
    put("web", "enable_lifecycle", args.enable_lifecycle)
    put("log", "level", args.log_level)
    put("log", "format", args.log_format)
    put("shard", "index", args.shard_index)
    put("shard", "count", args.shard_count)
    if args.demo:
        overrides["demo"] = True
    return overrides


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["simulate"]:
        from exporter.simulator.cli import main as simulate

        return simulate(argv[1:])
    if argv[:1] == ["backfill"]:
        from exporter.backfill.cli import main as backfill

        return backfill(argv[1:])
    args = parser().parse_args(argv)
    from exporter.config import ConfigError, load_settings

    try:
        settings = load_settings(args.config, flag_overrides(args))
        web_config = _load_web_config(settings)
    except ConfigError as exc:
        for problem in exc.problems:
            print(redactor.mask(problem), file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(settings.log.level, settings.log.format)
    redactor.add(settings.secrets())
    try:
        overrides = flag_overrides(args)
        return asyncio.run(
            serve(settings, web_config, load=lambda: load_settings(args.config, overrides))
        )
    except KeyboardInterrupt:
        return 0


def _load_web_config(settings: Settings) -> WebConfig | None:
    if settings.web.config_file is None:
        return None
    from exporter.web import load_web_config

    return load_web_config(settings.web.config_file)


async def serve(
    settings: Settings,
    web_config: WebConfig | None = None,
    load: Callable[[], Settings] | None = None,
) -> int:
    """Run until SIGTERM or SIGINT, reloading `load()` on SIGHUP; 0 on a clean stop, 1 when it
    cannot listen."""
    from exporter.heap import tune_runtime
    from exporter.server import build_app
    from exporter.web import RequestGuard

    heap = tune_runtime()

    async with AsyncExitStack() as stack:
        keeper = asyncio.create_task(heap.keep(_heap_failed))
        stack.callback(keeper.cancel)
        if settings.demo:
            settings, load = await _with_demo_targets(settings, load, stack)
        # Always there with a web config, so a reload can add checks a TLS-only file had not.
        guard = RequestGuard(web_config) if web_config is not None else None
        app = build_app(settings, load=load, request_guard=guard)
        if not await _listen(app, settings, web_config, stack):
            return 1
        await _wait_for_signal(_reload_on_hup(app))
        get_logger("exporter").info("stopping")
    return 0


async def _with_demo_targets(
    settings: Settings, load: Callable[[], Settings] | None, stack: AsyncExitStack
) -> tuple[Settings, Callable[[], Settings] | None]:
    """The settings (and those each reload loads) with the simulated services' targets,
    started on loopback until `stack` closes."""
    from exporter.demo import start_demo_targets

    dress = await start_demo_targets(settings, stack)
    settings = dress(settings)
    if load is not None:
        undressed = load
        load = lambda: dress(undressed())  # noqa: E731
    redactor.add(settings.secrets())
    return settings, load


async def _listen(
    app: web.Application, settings: Settings, web_config: WebConfig | None, stack: AsyncExitStack
) -> bool:
    """Serve `app` on the listen address until `stack` closes; False (logged) when it cannot."""
    from aiohttp import web

    from exporter.web import Listener

    log = get_logger("exporter")
    # keepalive_timeout also closes a connection that never sends a request.
    idle = settings.web.idle_timeout
    runner = web.AppRunner(
        app, access_log=None, shutdown_timeout=SHUTDOWN_GRACE, keepalive_timeout=idle
    )
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    host, port = parse_listen_address(settings.web.listen_address)
    ssl_context = web_config.ssl_context() if web_config is not None else None
    listener = Listener(
        runner, host, port, max_connections=settings.web.max_connections, ssl_context=ssl_context
    )
    try:
        await listener.start()
    except OSError as exc:
        log.error("cannot listen", address=settings.web.listen_address, error=str(exc))
        return False
    stack.callback(listener.close)
    if web_config is not None:
        web_config.log_summary()
    log.info(
        "listening",
        address=settings.web.listen_address,
        bound=[_host_port(address) for address in listener.addresses],
        telemetry_path=settings.web.telemetry_path,
        tls=ssl_context is not None,
        max_connections=listener.guard.cap,
        idle_timeout=idle,
        demo=settings.demo,
    )
    return True


def _reload_on_hup(app: web.Application) -> Callable[[], None]:
    """What SIGHUP does: start a reload, when the app has a reloader."""
    from exporter.server import RELOADER

    reloads: set[asyncio.Task[list[str]]] = set()

    def on_hup() -> None:
        if RELOADER in app:
            task = asyncio.create_task(app[RELOADER].reload("SIGHUP"))
            reloads.add(task)
            task.add_done_callback(reloads.discard)

    return on_hup


def _heap_failed(exc: Exception) -> None:
    """A round of the heap's keeper raised: said once a period at most, and the keeper goes on
    (`exporter.heap.Heap.keep`)."""
    get_logger("exporter").error(
        "collecting the heap failed; trying again next period", error=repr(exc)
    )


def _host_port(address: Any) -> str:
    """A bound socket address as host:port, so `:0` shows the port the kernel chose."""
    if not isinstance(address, tuple):
        return str(address)
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def _wait_for_signal(on_hup: Callable[[], None]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGHUP, on_hup)
    try:
        await stop.wait()
    finally:
        # SIGTERM stays handled until the loop closes: a process-group stop (`make demo`,
        # `kill -- -PGID`) delivers it twice, and the second must not cut the clean-up short.
        # A second Ctrl-C still stops at once.
        loop.remove_signal_handler(signal.SIGINT)
