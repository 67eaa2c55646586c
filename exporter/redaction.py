"""One redactor for every text the exporter keeps or writes: log lines, and what a provider
answered (its error messages, codes and request ids) before a page, a JSON document, a log
line or an error can hold it.

It masks the configured secrets by value (`Redactor.add`: the AIHC access key id and secret
key, Alaya's api key and access key pair), in every spelling a reply may echo one in (as it
is, JSON-escaped, percent-encoded, HTML-escaped), and a cut-off piece of one at either end of a
text (a provider cut its message in the middle of it); then the shapes of credentials in free
text (`bce-auth-v1/...` and `...-HMAC-SHA256 ...` signatures, `Bearer ...` tokens,
`Authorization: ...`). Provider text (`Redactor.provider_text`) loses besides its query
strings and `key=value` pairs whose key names a credential, and is cut to a bounded length,
after masking, so the cut never keeps a piece of a secret.

A secret stays masked after a rotation replaced it: the old key is what a gateway refusing it
echoes.
"""

from __future__ import annotations

import html
import json
import re
import urllib.parse
from collections.abc import Iterable, MutableMapping
from typing import Any, Final

REDACTED: Final = "[REDACTED]"
# A message kept from a reply or an exception, after redaction.
MESSAGE_CHARS: Final = 300
# Shorter values are not masked by value: they would mask ordinary words.
MIN_SECRET: Final = 4
# The shortest piece of a secret masked where a text was cut through it.
MIN_PIECE: Final = 8

# Keys of a log event whose value is a secret whatever it holds.
SECRET_KEY = re.compile(
    r"(secret|password|passwd|token|api[_-]?key|access[_-]?key|authorization|credential|"
    r"signature|cookie|imageconfig)",
    re.IGNORECASE,
)
_SHAPES = (
    re.compile(r"bce-auth-v1/[^\s\"',]+"),
    re.compile(r"(?i)\bBearer\s+[^\s\"',]+"),
    # An HMAC scheme's credential (`<scheme>-HMAC-SHA256 <key id>:<time>:<signature>`).
    re.compile(r"(?i)\b[a-z0-9]+-HMAC-SHA256\s+[^\s\"',]+"),
    re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic)\s+)?[^\"',}\s]+"),
)
# Provider text only: `key=value` (or `key: value`) whose key names a credential. Not in logs,
# where the exporter's own lines name keys (`secret_access_key: Field required`).
_PAIR = re.compile(
    r"(?i)(authorization|bearer|signature|secret|token|password|api[_-]?key|access[_-]?key"
    r"|x-bce-[a-z-]+)([\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic)\s+)?[^\s,;&\"'}]+"
)
_QUERY = re.compile(r"\?[^\s\"'<>]*")


def spellings(secret: str) -> set[str]:
    """`secret` as a reply may carry it: plain, JSON-escaped (with and without `\\/` and
    `\\uXXXX`), percent-encoded and HTML-escaped."""
    escaped = json.dumps(secret)[1:-1]
    forms = {
        secret,
        escaped,
        escaped.replace("/", "\\/"),
        json.dumps(secret, ensure_ascii=False)[1:-1],
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote_plus(secret),
        html.escape(secret, quote=True),
    }
    return {f for f in forms if len(f) >= MIN_SECRET}


class Redactor:
    """Masks the configured secrets and the shapes of credentials; a structlog processor too."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._forms: list[str] = []
        # Every MIN_PIECE characters in a row of a form: what a cut-off piece ends or starts with.
        self._grams: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Mask these values from now on, besides those added before."""
        forms = {*self._forms}
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET:
                forms |= spellings(secret)
        # Longest first, so a secret that contains another is masked whole.
        self._forms = sorted(forms, key=lambda f: (-len(f), f))
        self._grams = {f[i : i + MIN_PIECE] for f in self._forms for i in range(len(f))}

    def mask(self, text: str) -> str:
        """`text` with every configured secret, and every shape of a credential, masked."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, REDACTED)
        text = self._ends(text)
        for shape in _SHAPES:
            if shape.groups:
                text = shape.sub(lambda m: m.group(1) + REDACTED, text)
            else:
                text = shape.sub(REDACTED, text)
        return text

    def _ends(self, text: str) -> str:
        """A piece of a secret cut off at either end of `text` (at least MIN_PIECE long)."""
        tail, head = text[-MIN_PIECE:] in self._grams, text[:MIN_PIECE] in self._grams
        for form in self._forms if tail or head else ():
            for size in range(len(form) - 1, MIN_PIECE - 1, -1) if tail else ():
                if text.endswith(form[:size]):
                    text, tail = text[:-size] + REDACTED, False
                    break
            for size in range(len(form) - 1, MIN_PIECE - 1, -1) if head else ():
                if text.startswith(form[-size:]):
                    text, head = REDACTED + text[size:], False
                    break
        return text

    def provider_text(self, text: str | None, limit: int = MESSAGE_CHARS) -> str:
        """What a provider sent, fit to keep: masked, without query strings or credential
        pairs, printable, at most `limit` characters."""
        if not text:
            return ""
        text = self.mask(text[: limit * 16])[: limit * 4]
        text = _QUERY.sub("?" + REDACTED, text)
        text = _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
        text = "".join(c if c.isprintable() else " " for c in text)
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def value(self, value: Any) -> Any:
        """A log event's value with every secret in it masked (keys naming one, wholly)."""
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {
                k: REDACTED if SECRET_KEY.search(str(k)) else self.value(v)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple | set):
            return [self.value(v) for v in value]
        if isinstance(value, int | float | bool) or value is None:
            return value
        return self.mask(str(value))

    def __call__(
        self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
    ) -> MutableMapping[str, Any]:
        for key in list(event_dict):
            if SECRET_KEY.search(key):
                event_dict[key] = REDACTED
            else:
                event_dict[key] = self.value(event_dict[key])
        return event_dict


# The process's redactor: the CLI and each reload add the configured secrets; logs and the
# transport use it.
redactor = Redactor()


def redact(text: str | None, limit: int = MESSAGE_CHARS) -> str:
    """Provider text, fit to keep (`Redactor.provider_text` of the process's redactor)."""
    return redactor.provider_text(text, limit)
