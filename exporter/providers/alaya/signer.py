"""The access-key signature of Alaya's console API (`/api/osm/...`), used by the job list.

`Authorization: alayanew-HMAC-SHA256 {ak}:{ms}:{sig}`: `ms` is unix milliseconds, `sig` the
lowercase hex HMAC-SHA256, keyed with the secret key, of `"{ms}|{METHOD}|{path}"` (the path
without scheme, host or query). The gateway refuses a timestamp more than 5 minutes off its
clock, so each attempt signs anew (`LimitedClient` calls `prepare` per attempt).
"""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import urlsplit

SCHEME = "alayanew-HMAC-SHA256"


def signature(secret_access_key: str, millis: int, method: str, path: str) -> str:
    message = f"{millis}|{method.upper()}|{urlsplit(path).path}"
    return hmac.new(secret_access_key.encode(), message.encode(), hashlib.sha256).hexdigest()


def authorization(
    access_key_id: str, secret_access_key: str, millis: int, method: str, path: str
) -> str:
    sig = signature(secret_access_key, millis, method, path)
    return f"{SCHEME} {access_key_id}:{millis}:{sig}"
