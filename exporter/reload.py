"""Live reload of the whole configuration: on SIGHUP, and on POST /-/reload when the exporter
runs with `--web.enable-lifecycle` (as Prometheus does; the route sits behind the web
config's TLS and basic auth like every other).

The configuration is read again as at start (the file, the `TJE_` environment, the flags given
at start), and secrets from `*_file` are read again. One that does not validate is refused
with the same one line per problem as at start, the running configuration stays, and
`training_exporter_config_last_reload_successful` says 0. One that does: targets that stay the
same run on untouched, changed ones are rebuilt keeping their series and counters, removed
ones' series go and new ones start (`ExporterState.apply`). The web config file is read again
too, and refused like the configuration when it does not validate: its users, headers, rate
limit and allowed client SANs go live (`exporter.web.reread`), its `tls_server_config` waits
for a restart. The listen address, telemetry path and web config file's path are the
server's: a change to them is logged and waits for a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from exporter.config import ConfigError, Settings
from exporter.logs import configure_logging, get_logger
from exporter.redaction import redactor
from exporter.selfmetrics import SelfMetrics
from exporter.web import RequestGuard, WebConfig, reread

log = get_logger(__name__)

RESTART_ONLY = ("listen_address", "telemetry_path", "config_file")


class Running(Protocol):
    """What a reload changes: the server's state (`exporter.server.ExporterState`), named by
    what it offers so that the server, which holds a Reloader, is not imported back."""

    settings: Settings
    metrics: SelfMetrics

    async def apply(self, settings: Settings) -> list[str]: ...


class Reloader:
    def __init__(
        self, state: Running, load: Callable[[], Settings], web: RequestGuard | None = None
    ) -> None:
        self._state = state
        self._load = load
        # The app's guard holding the web config read at start; None without a web config.
        self._web = web
        self._lock = asyncio.Lock()

    async def reload(self, trigger: str) -> list[str]:
        """Reload now: [] when it succeeded, else the problems (the old configuration runs)."""
        async with self._lock:
            state, metrics = self._state, self._state.metrics
            try:
                # The file is bounded, but parsing it is still work for a thread.
                settings = await asyncio.to_thread(self._load)
                web_config = await self._reread_web()
            except ConfigError as exc:
                problems = [redactor.mask(p) for p in exc.problems]
                metrics.reload_ok.set(0)
                for problem in problems:
                    log.error(
                        "configuration reload refused; the running configuration stays",
                        trigger=trigger,
                        problem=problem,
                    )
                return problems
            current = state.settings.web
            pending = [k for k in RESTART_ONLY if getattr(settings.web, k) != getattr(current, k)]
            if pending:
                log.warning("web settings change only on restart", trigger=trigger, keys=pending)
                web = settings.web.model_copy(update={k: getattr(current, k) for k in pending})
                settings = settings.model_copy(update={"web": web})
            if settings.log != state.settings.log:
                configure_logging(settings.log.level, settings.log.format)
            changes = await state.apply(settings)
            if web_config is not None and self._web is not None:
                fresh, tls_changed = web_config
                self._web.use(fresh)
                if tls_changed:
                    log.warning(
                        "web config tls_server_config changes only on restart", trigger=trigger
                    )
            metrics.reload_ok.set(1)
            metrics.reload_at.set_to_current_time()
            log.info("configuration reloaded", trigger=trigger, changes=changes)
            return []

    async def _reread_web(self) -> tuple[WebConfig, bool] | None:
        current = self._web.config if self._web is not None else None
        if current is None:
            return None
        # bcrypt hashes are checked for shape only; reading PEM files is file work.
        return await asyncio.to_thread(reread, current)
