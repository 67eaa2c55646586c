"""What the transport and the providers agree on.

A provider's client builds `PreparedRequest`s, classifies and parses `ApiResponse`s; it never
sees a session, the gate or a retry (`transport.limited` does those).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from exporter.transport.reply import decode_json

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
AUTH_STATUS = frozenset({401, 403})


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class ApiResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes
    _decoded: list[Any] = field(default_factory=list, repr=False, compare=False)

    def json(self) -> Any:
        """The body's JSON, decoded once (a classifier and a parse callback share it);
        `InvalidReply` when it is not JSON."""
        if not self._decoded:
            self._decoded.append(decode_json(self.body))
        return self._decoded[0]


@dataclass(frozen=True, slots=True)
class Failure:
    retryable: bool
    message: str
    # Credentials trouble: never retried, logged once per change.
    auth: bool = False
    # The credentials were refused: stop the target's calls until the next round.
    blocks: bool = False
    request_id: str | None = None
    provider_code: str | None = None
    # The code label, when it should differ from the HTTP status (Alaya's body status).
    code: str | None = None


# Decides, from a response with a 2xx-5xx status, whether it failed and whether to retry.
# Returns None when the response is a success.
Classifier = Callable[[ApiResponse], "Failure | None"]


def default_classifier(response: ApiResponse) -> Failure | None:
    if response.status < 400:
        return None
    auth = response.status in AUTH_STATUS
    return Failure(
        retryable=response.status in RETRYABLE_STATUS,
        auth=auth,
        blocks=auth,
        message=f"HTTP {response.status}",
    )


@dataclass(eq=False)  # compared and hashed by identity, as exceptions are
class ApiError(Exception):
    """A call that failed for good. `code` is the HTTP status, or `timeout` / `error`."""

    endpoint: str
    code: str
    message: str
    _: KW_ONLY
    auth: bool = False
    request_id: str | None = None
    provider_code: str | None = None

    def __str__(self) -> str:
        return f"{self.endpoint}: {self.code}: {self.message}"


class CallSkipped(Exception):
    """The credentials were refused when the call's turn came: nothing was sent or counted."""


class CallDropped(Exception):
    """The call's turn would have come after its deadline: dropped unsent, counted in
    `training_exporter_api_calls_dropped_total`, never as a failure."""
