"""A remote-write client for the backfill: one request at a time, retried as the protocol says.

- 2xx: sent.
- 429, 5xx, a timeout or a broken connection: retried, `retries` times at most, after an
  exponential backoff with full jitter, or after the reply's `Retry-After` when that is longer
  (`transport.limited.retry_after_seconds` reads it). A store asking for more than `MAX_WAIT`
  stops the run: the next run goes on where it stopped.
- Any other 4xx: refused, never retried (the protocol forbids it): the batch is counted under
  the reason its message names (`reason`), with the message, bounded and redacted.
- 401/403 (credentials), 404/405 (no receiver at that URL): the run stops at once; every batch
  would get the same answer.
- Prometheus 2.42 answers 500 `too old sample` when a sample is outside its out-of-order
  window (observed: its write handler lists only out-of-order, out-of-bounds and duplicate
  samples as 400): a 5xx naming a sample's time is a refusal too, or it would be retried
  forever.

Auth and TLS as any remote-write client: basic auth (the password from a file), a bearer token
from a file, extra headers (a tenant's), a CA file and a client certificate and key. Replies
are read up to `MESSAGE_BYTES` (a refusal's message) or `PROBE_BYTES` (the probes'), whatever
the store sends.
"""

from __future__ import annotations

import asyncio
import base64
import random
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import aiohttp

from exporter.backfill.prompb import HEADERS
from exporter.redaction import redact
from exporter.transport.http import USER_AGENT as EXPORTER_AGENT
from exporter.transport.limited import retry_after_seconds
from exporter.transport.reply import ReplyTooLarge, read_capped

USER_AGENT: Final = f"{EXPORTER_AGENT} backfill"
BACKOFF_BASE: Final = 0.5
BACKOFF_CAP: Final = 30.0
MAX_WAIT: Final = 600.0
MESSAGE_BYTES: Final = 4096
PROBE_BYTES: Final = 8 * 1024 * 1024
STOP_STATUS: Final = frozenset({401, 403, 404, 405})
# What a refusal's message names, in the order they are looked for (lowercase). Closed: a
# store's own wording maps to one of these or to `other`.
REASONS: Final = (
    (
        "too_old",
        ("too old", "too_old", "too-old", "out of bounds", "too far in the past", "retention"),
    ),
    ("out_of_order", ("out of order", "out-of-order", "out_of_order")),
    ("duplicate", ("duplicate",)),
    ("over_limit", ("limit", "too many", "too large", "too big", "exceeded")),
)
OTHER: Final = "other"
SAMPLE_REASONS: Final = frozenset({"too_old", "out_of_order", "duplicate"})


def reason(status: int, message: str) -> str:
    """The refusal's reason: what its message names; 413 is over a limit."""
    text = message.lower()
    for name, words in REASONS:
        if any(word in text for word in words):
            return name
    return "over_limit" if status == 413 else OTHER


def clean(text: str) -> str:
    """A store's message as it may be shown: bounded, query strings and credentials out."""
    return redact(text.strip())


class StoreStopped(Exception):
    """Sending cannot go on this run (the message says why); what was sent stays sent."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    message: str
    # None: sent.
    refused: str | None = None


@dataclass(frozen=True)
class Auth:
    """The request's credentials and TLS, read from files when the run starts."""

    user: str | None = None
    password: str | None = None
    token: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def secrets(self) -> list[str]:
        return [s for s in (self.password, self.token, *self.headers.values()) if s]

    def header_values(self) -> dict[str, str]:
        out = {**HEADERS, "User-Agent": USER_AGENT, **self.headers}
        if self.token is not None:
            out["Authorization"] = f"Bearer {self.token}"
        elif self.user is not None:
            pair = f"{self.user}:{self.password or ''}".encode()
            out["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return out

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context; ValueError naming the file that cannot be used."""
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"CA file {self.ca_file}: {exc}") from None
        if self.cert_file is not None:
            try:
                context.load_cert_chain(self.cert_file, self.key_file)
            except (OSError, ssl.SSLError) as exc:
                raise ValueError(f"client certificate {self.cert_file}: {exc}") from None
        return context


def read_secret(path: str, what: str) -> str:
    """A secret from a file, its trailing newline off; ValueError naming the file."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{what} {path}: {exc.__class__.__name__}") from None
    if not text:
        raise ValueError(f"{what} {path} is empty")
    return text


def base_url(url: str) -> str | None:
    """The store's root when `url` is a Prometheus-style `.../api/v1/write`; else None."""
    path = urlsplit(url).path.rstrip("/")
    if not path.endswith("/api/v1/write"):
        return None
    return url[: url.index(path)] + path.removesuffix("/api/v1/write")


class RemoteWriteClient:
    def __init__(
        self,
        url: str,
        auth: Auth,
        *,
        timeout: float = 30.0,
        retries: int = 8,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.url = url
        self.shown = clean(url)
        self.auth = auth
        self.timeout = timeout
        self.retries = retries
        self._sleep = sleep
        self._headers = auth.header_values()
        self._ssl = auth.ssl_context() if url.startswith("https:") else None
        self._session: aiohttp.ClientSession | None = None
        # Every request written, and the retries by what caused them (a status, timeout, error).
        self.requests = 0
        self.retried: Counter[str] = Counter()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1, ssl=self._ssl or True),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def get(self, url: str) -> tuple[int, bytes]:
        """One GET with the same credentials (the probes); the body up to `PROBE_BYTES`.
        Raises OSError-like failures as `StoreStopped`."""
        headers = {k: v for k, v in self._headers.items() if k not in HEADERS}
        try:
            async with self.session.get(url, headers=headers, allow_redirects=False) as resp:
                return resp.status, await read_capped(resp, PROBE_BYTES)
        except (aiohttp.ClientError, TimeoutError, ReplyTooLarge) as exc:
            why = clean(str(exc)) or type(exc).__name__
            raise StoreStopped(f"GET {clean(url)}: {why}") from None

    async def _attempt(self, body: bytes) -> tuple[int, str, str | None]:
        self.requests += 1
        async with self.session.post(
            self.url, data=body, headers=self._headers, allow_redirects=False
        ) as resp:
            text = (await resp.content.read(MESSAGE_BYTES)).decode("utf-8", "replace")
            return resp.status, text, resp.headers.get("Retry-After")

    async def send(self, body: bytes) -> Answer:
        """POST one compressed WriteRequest: its answer once sent or refused; `StoreStopped`
        when the store cannot take it this run."""
        attempt = 0
        while True:
            try:
                status, text, hint = await self._attempt(body)
            except (aiohttp.ClientError, TimeoutError) as exc:
                status, text, hint = 0, type(exc).__name__, None
            verdict = self._verdict(status, text)
            if verdict is not None:
                return verdict
            cause = "timeout" if text == "TimeoutError" else str(status or "error")
            if attempt >= self.retries:
                raise StoreStopped(
                    f"{self.shown}: no success after {attempt + 1} attempts "
                    f"(last: {cause} {clean(text)})"
                )
            await self._sleep(self.delay(attempt, retry_after_seconds(hint) if hint else None))
            self.retried[cause] += 1
            attempt += 1

    def _verdict(self, status: int, text: str) -> Answer | None:
        """The answer for good, None to retry; `StoreStopped` for credentials or the URL."""
        message = clean(text)
        if 200 <= status < 300:
            return Answer(status, message)
        if status in STOP_STATUS:
            raise StoreStopped(f"{self.shown} answered HTTP {status}: {message}")
        why = reason(status, text)
        if 400 <= status < 500 and status != 429:
            return Answer(status, message, why)
        if status >= 500 and why in SAMPLE_REASONS:
            return Answer(status, message, why)
        return None

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry `attempt + 1`: backoff with full jitter, at least the store's
        `Retry-After`; `StoreStopped` when the store asks for more than `MAX_WAIT`."""
        if retry_after is not None and retry_after > MAX_WAIT:
            raise StoreStopped(
                f"{self.shown} asks to wait {retry_after:.0f} s (Retry-After): run the same "
                "command again later"
            )
        backoff = random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
        return max(backoff, retry_after or 0.0)
