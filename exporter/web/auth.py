"""Basic auth: `Authorization: Basic` checked against bcrypt hashes, as exporter-toolkit does.

Like exporter-toolkit: unknown users are checked against a decoy hash of the same cost, so the
time taken does not tell which names exist, and passwords are compared on their first 72
bytes, as Go's and OpenBSD's bcrypt do. Unlike it, under a flood of wrong passwords:

- only successful checks are cached (`exporter.web.cache`), so a scraper's repeated
  credentials cost one bcrypt in total and no guess can evict them: a cached scrape stays at
  its usual few milliseconds while 250 connections guess;
- bcrypt runs in threads, at most `BCRYPT_CONCURRENCY` at once (one cost-10 check is ~62 ms of
  a core; the event loop and the polls keep the rest);
- a check whose client has gone by the time its turn comes is dropped, not run: guessers that
  give up leave no queued bcrypt behind them.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping

import bcrypt

from exporter.web.cache import SuccessCache

BCRYPT_CONCURRENCY = 2
BCRYPT_MAX_PASSWORD = 72
_BCRYPT_ALPHABET = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


class BasicAuthUsers:
    """The users of a web config and their bcrypt hashes."""

    def __init__(self, hashes: Mapping[str, bytes], concurrency: int = BCRYPT_CONCURRENCY) -> None:
        self.hashes = dict(hashes)
        # Counters for tests and the log: checks run, and checks dropped (client gone).
        self.bcrypt_checks = 0
        self.dropped_checks = 0
        self._names = [(_digest(name.encode()), hashed) for name, hashed in self.hashes.items()]
        self._decoy = _decoy_hash(max(_cost(h) for h in self.hashes.values()))
        # The cache is keyed by an HMAC with a per-process random key: it holds no password.
        self._cache_key = secrets.token_bytes(32)
        self._cache = SuccessCache()
        self._slots = asyncio.Semaphore(concurrency)

    async def allows(
        self, authorization: str | None, client_gone: Callable[[], bool] | None = None
    ) -> bool:
        """Whether the header names a user and that user's password.

        `client_gone` is asked before a queued bcrypt runs; True drops the check (False).
        """
        credentials = _basic_credentials(authorization) if authorization else None
        if credentials is None:
            return False
        user, password = credentials
        stored = self._lookup(user)
        hashed = stored if stored is not None else self._decoy
        key = hmac.new(
            self._cache_key, b"%d:%s%s%s" % (len(user), user, hashed, password), hashlib.sha256
        ).digest()
        if self._cache.hit(key):
            return True
        async with self._slots:
            if self._cache.hit(key):  # the same credentials passed while this one waited
                return True
            if client_gone is not None and client_gone():
                self.dropped_checks += 1
                return False
            matches = await asyncio.to_thread(_bcrypt_matches, password, hashed)
            self.bcrypt_checks += 1
        if matches and stored is not None:
            self._cache.add(key)
            return True
        return False

    def _lookup(self, user: bytes) -> bytes | None:
        """The user's hash, looking at every name so the time taken does not depend on which."""
        wanted = _digest(user)
        found = None
        for name, hashed in self._names:
            if hmac.compare_digest(name, wanted):
                found = hashed
        return found


def _basic_credentials(header: str) -> tuple[bytes, bytes] | None:
    """(user, password) from `Basic base64(user:password)`, read as Go's Request.BasicAuth does.

    aiohttp's BasicAuth.decode would do this, but aiohttp 3.14 deprecates the class for removal.
    """
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def _cost(hashed: bytes) -> int:
    return int(hashed[4:6])


def _decoy_hash(cost: int) -> bytes:
    """A well-formed hash of the given cost that no password matches, for unknown users."""
    checksum = "".join(secrets.choice(_BCRYPT_ALPHABET) for _ in range(31))
    return bcrypt.gensalt(rounds=cost) + checksum.encode()


def _bcrypt_matches(password: bytes, hashed: bytes) -> bool:
    try:
        return bcrypt.checkpw(password[:BCRYPT_MAX_PASSWORD], hashed)
    except ValueError:
        return False
