"""A loaded web config in front of every route: headers, rate limit, client SANs, basic auth.

Every route of the app is behind it (`RequestGuard.middleware` is an app-wide middleware), as in
node_exporter and Prometheus, whose `/-/healthy` and `/-/ready` sit behind the same wrapper:
the telemetry path, `/-/healthy`, `/-/ready`, the landing page and any route added later (a
`POST /-/reload`, say) need the client certificate and the password when those are
configured. Kubernetes probes should then use `tcpSocket`. A reload reads the file again
(`reread`) and puts it live with `RequestGuard.use`: users, headers, rate limit and allowed
client SANs change at once. The TLS context is the listener's and stays (it already follows its
certificate files); a changed `tls_server_config` waits for a restart.
"""

from __future__ import annotations

import functools
import ssl
from pathlib import Path

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware
from aiolimiter import AsyncLimiter

from exporter.configfile import ConfigError
from exporter.logs import LogThrottle, get_logger
from exporter.web.auth import BasicAuthUsers
from exporter.web.config import (
    WebConfigFile,
    file_problems,
    prefixed,
    read_web_config_file,
    tls_enabled,
    tls_problems,
)
from exporter.web.tls_config import TlsContexts, normal_ip, peer_sans

log = get_logger(__name__)


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check the web config file; raise ConfigError with every problem found."""
    path = Path(path)
    model = read_web_config_file(path)
    problems = file_problems(model)
    tls, tls_config = None, model.tls_server_config
    if tls_config is not None and tls_enabled(tls_config) and not tls_problems(tls_config):
        try:
            tls = TlsContexts(tls_config, path.parent)
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(prefixed(problems))
    return WebConfig(path=path, model=model, tls=tls)


def reread(current: WebConfig) -> tuple[WebConfig, bool]:
    """`current`'s file read and checked again, with the listener's TLS kept, and whether its
    `tls_server_config` changed (which waits for a restart); ConfigError when it is invalid."""
    fresh = load_web_config(current.path)
    tls_changed = fresh.model.tls_server_config != current.model.tls_server_config
    # What runs keeps the running TLS settings, so a later reload still sees the difference.
    model = fresh.model.model_copy(update={"tls_server_config": current.model.tls_server_config})
    kept = WebConfig(path=current.path, model=model, tls=current.tls)
    same_users = current.users is not None and kept.users is not None
    if same_users and kept.users.hashes == current.users.hashes:  # type: ignore[union-attr]
        # Same users: keep their cache of successful checks (no new bcrypt per scraper).
        kept.users = current.users
    return kept, tls_changed


class WebConfig:
    """A loaded web config: the TLS context for the listener and the checks of each request."""

    def __init__(self, *, path: Path, model: WebConfigFile, tls: TlsContexts | None) -> None:
        self.path = path
        self.model = model
        self.tls = tls
        http = model.http_server_config
        self.headers = {k: v for k, v in ((http.headers if http else None) or {}).items() if v}
        rate = model.rate_limit
        self.limiter: AsyncLimiter | None = None
        if rate is not None and rate.interval > 0:
            # Go's rate.NewLimiter(Every(interval), burst): `burst` tokens, one back per interval.
            self.limiter = AsyncLimiter(rate.burst, rate.burst * rate.interval)
        self.users: BasicAuthUsers | None = None
        if model.basic_auth_users:
            self.users = BasicAuthUsers(
                {n: h.get_secret_value().encode() for n, h in model.basic_auth_users.items()}
            )
        sans = tls.settings.client_allowed_sans if tls else None
        self.allowed_sans = {normal_ip(s) for s in sans} if sans is not None else None
        self._steps = self._build_steps()
        self._rejections = LogThrottle()

    @property
    def notes(self) -> list[str]:
        return self.tls.notes if self.tls else []

    def ssl_context(self) -> ssl.SSLContext | None:
        return self.tls.base if self.tls else None

    def log_summary(self) -> None:
        tls = self.tls.settings if self.tls else None
        log.info(
            "web config loaded",
            path=str(self.path),
            tls=tls is not None,
            client_auth=tls.client_auth_type if tls else None,
            basic_auth_users=len(self.users.hashes) if self.users else 0,
            rate_limit=self.limiter is not None,
        )
        for note in self.notes:
            log.warning("web config note", note=note)

    async def handle(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """`handler(request)` behind every check this config asks for, outermost first."""
        for step in reversed(self._steps):
            handler = functools.partial(step, handler=handler)
        return await handler(request)

    def _build_steps(self) -> list[Middleware]:
        chain: list[Middleware] = []
        if self.headers:
            chain.append(self._add_headers)
        if self.limiter is not None:
            chain.append(self._rate_limit)
        if self.allowed_sans is not None:
            chain.append(self._check_client_sans)
        if self.users is not None:
            chain.append(self._basic_auth)
        return chain

    async def _add_headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            exc.headers.update(self.headers)
            raise
        if not response.prepared:
            response.headers.update(self.headers)
        return response

    async def _rate_limit(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        assert self.limiter is not None
        if not self.limiter.has_capacity():
            raise web.HTTPTooManyRequests(text="Too Many Requests\n")
        await self.limiter.acquire()
        return await handler(request)

    async def _check_client_sans(
        self, request: web.Request, handler: Handler
    ) -> web.StreamResponse:
        assert self.allowed_sans is not None
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        if not peercert or not peer_sans(peercert) & self.allowed_sans:
            self._log_rejection("client certificate SAN not allowed", request)
            raise web.HTTPForbidden(text="Forbidden\n")
        return await handler(request)

    async def _basic_auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        assert self.users is not None

        def client_gone() -> bool:
            transport = request.transport
            return transport is None or transport.is_closing()

        if await self.users.allows(request.headers.get(hdrs.AUTHORIZATION), client_gone):
            return await handler(request)
        # Neither the user name nor the header is logged: a password typed as a user name
        # would end up in the log.
        self._log_rejection("basic auth rejected", request)
        raise web.HTTPUnauthorized(headers={hdrs.WWW_AUTHENTICATE: "Basic"}, text="Unauthorized\n")

    def _log_rejection(self, event: str, request: web.Request) -> None:
        self._rejections.log(event, log.debug, event, peer=request.remote)


class RequestGuard:
    """The one middleware in front of every route, applying the web config it holds."""

    def __init__(self, config: WebConfig | None = None) -> None:
        self.config = config

    def use(self, config: WebConfig | None) -> None:
        self.config = config

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        config = self.config
        if config is None:
            return await handler(request)
        return await config.handle(request, handler)
