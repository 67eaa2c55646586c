"""JSON decoding and model validation where any exception is `InvalidReply`, never more.

A deeply nested reply raised RecursionError, which the parsers (catching ValueError) let
through: the whole target's poll was thrown away, a second job lost its 80 series, and the
failed call was not counted. Here every exception of decoding or validating becomes
`InvalidReply`, which fails that one call (counted as code `error`, see `exporter.api`).

Text is decoded as UTF-8 with `surrogateescape`: an invalid byte in a name becomes a lone
surrogate (U+DC80-U+DCFF) instead of refusing the reply, so the name survives to the label
cleaner (`labels.label`), which makes it valid without merging it with another name, and
`wire` gives the upstream its own bytes back when the name goes into a request.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError


class InvalidReply(ValueError):
    """Raised by a `parse` callback for a reply whose body cannot be used."""


M = TypeVar("M", bound=BaseModel)
_BOM = "\ufeff"


def decode_json(body: bytes | str, *, error: type[InvalidReply] = InvalidReply) -> Any:
    """The JSON value of `body`; `error` for anything that is not JSON (or too deep for it).

    Control characters inside strings are accepted (`strict=False`): a raw tab in a name is an
    odd name, not a reason to drop the reply.
    """
    try:
        text = body if isinstance(body, str) else bytes(body).decode("utf-8", "surrogateescape")
        return json.loads(text.removeprefix(_BOM), strict=False)
    except Exception as exc:  # RecursionError, ValueError, MemoryError, ...: all the same here
        raise error(f"not JSON: {exc.__class__.__name__}") from None


def validate(model: type[M], data: Any, *, error: type[InvalidReply] = InvalidReply) -> M:
    """`data` as `model`; `error` naming the field paths (never the values: they may hold
    secrets) when it does not fit."""
    if not isinstance(data, dict):
        raise error(f"expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})[:5]
        raise error(f"unexpected shape at {', '.join(where) or 'top level'}") from None
    except Exception as exc:
        raise error(f"unusable reply: {exc.__class__.__name__}") from None
