"""The exporter's HTTP side, split as prometheus/exporter-toolkit splits its `web` package.

- `config`: the `--web.config.file` format (exporter-toolkit's keys) and its checks;
- `tls_config`: the listener's SSLContext, re-read when the certificate files change;
- `auth` and `cache`: basic auth with bcrypt, and the cache of successful checks;
- `handler`: the loaded web config as one app-wide middleware (`RequestGuard`), in front of every
  route, and `load_web_config`;
- `listener`: the listening socket with its connection cap, idle timeout and log filter;
- `markup`: the pieces every HTML page is made of (escaping, times, tables, the page);
- `landing_page`: the HTML at `/`, every target at a glance;
- `status_view`, `status_pages`, `status_routes`: each target's jobs and recent calls, and all
  of it as JSON (`docs/status-pages.md`): the documents, their HTML, their routes.
"""

from exporter.web.auth import BasicAuthUsers
from exporter.web.handler import RequestGuard, WebConfig, load_web_config, reread
from exporter.web.listener import Listener

__all__ = ["BasicAuthUsers", "Listener", "RequestGuard", "WebConfig", "load_web_config", "reread"]
