"""Listen addresses (`host:port`, `[v6]:port`, `:port`), parsed with nothing but `re`: the
configuration checks `web.listen_address` with it, and `simulate` its `--listen` and
`--control` without loading the configuration's models."""

from __future__ import annotations

import re


def parse_listen_address(value: str) -> tuple[str, int]:
    """`host:port`, `[v6]:port` or `:port` (all interfaces)."""
    match = re.fullmatch(r"(?:\[(?P<v6>[^\]]+)\]|(?P<host>[^:\[\]]*)):(?P<port>\d{1,5})", value)
    if not match or int(match["port"]) > 65535:
        raise ValueError("must be host:port, [ipv6]:port or :port")
    host = match["v6"] or match["host"] or "0.0.0.0"
    return host, int(match["port"])
