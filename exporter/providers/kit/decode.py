"""Model validation where any exception is `InvalidReply`, never more.

Parsing untrusted bytes can raise more than ValueError: a deeply nested reply raises
RecursionError. Anything that escaped here would throw the whole target's poll away (every other
job's series with it, 80 per AIHC job) without counting the failed call, so every exception of
decoding or validating becomes `InvalidReply`, which fails that one call (counted as code
`error`, see `exporter.transport.limited`). JSON decoding itself is
`exporter.transport.reply.decode_json`.

Text is decoded as UTF-8 with `surrogateescape`: an invalid byte in a name becomes a lone
surrogate (U+DC80-U+DCFF) instead of refusing the reply, so the name survives to the label
cleaner (`labels.label`), which makes it valid without merging it with another name, and
`wire` gives the upstream its own bytes back when the name goes into a request.

A list element that does not fit its model (a job or pod without its id, a point that is a
string) is dropped on its own and counted by reason (`each`, `Tolerant.dropped`): refusing
the whole reply for it would cost a whole page of the job list for one bad job.
Clean lists are validated whole, at pydantic-core's speed; only a list that fails is gone
through element by element, so a bad reply costs at most about three validations of itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Final, TypeVar

from pydantic import (
    BaseModel,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from exporter.transport.reply import InvalidReply as InvalidReply
from exporter.transport.reply import decode_json as decode_json

M = TypeVar("M", bound=BaseModel)
# The validation context's key for the drop counts of `each` lists.
_DROPPED: Final = "dropped"


class Tolerant(BaseModel):
    """A reply model whose `each` lists lose only their bad elements; `dropped` counts them."""

    # A plain default, not a factory: pydantic 2.13 inspects a factory's signature for every
    # instance, nested models included (1.3 of 2.2 s validating 1,441 AIHC metric replies).
    _dropped: Mapping[str, int] | None = PrivateAttr(default=None)

    @property
    def dropped(self) -> Mapping[str, int]:
        """Elements dropped by reason, in this reply and the models inside it."""
        return self._dropped or {}


def each(reason: str) -> WrapValidator:
    """A list validator that drops each element failing its type, counted as `reason`."""

    def check(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        if not isinstance(value, list):
            return handler(value)
        context = info.context
        counts: Counter[str] = (
            context[_DROPPED] if isinstance(context, dict) and _DROPPED in context else Counter()
        )
        before = counts.copy()
        try:
            return handler(value)
        except ValidationError:
            # Inner lists counted their drops in the failed attempt; they count again below.
            _restore(counts, before)
        kept: list[Any] = []
        for item in value:
            mark = counts.copy()
            try:
                kept.extend(handler([item]))
            except ValidationError:
                _restore(counts, mark)
                counts[reason] += 1
        return kept

    return WrapValidator(check)


def _restore(counts: Counter[str], saved: Counter[str]) -> None:
    counts.clear()
    counts.update(saved)


def validate(model: type[M], data: Any, *, error: type[InvalidReply] = InvalidReply) -> M:
    """`data` as `model`; `error` naming the field paths (never the values: they may hold
    secrets) when it does not fit."""
    if not isinstance(data, dict):
        raise error(f"expected a JSON object, got {type(data).__name__}")
    counts: Counter[str] = Counter()
    try:
        result = model.model_validate(data, context={_DROPPED: counts})
    except ValidationError as exc:
        where = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})[:5]
        raise error(f"unexpected shape at {', '.join(where) or 'top level'}") from None
    except Exception as exc:
        raise error(f"unusable reply: {exc.__class__.__name__}") from None
    if isinstance(result, Tolerant):
        result._dropped = dict(counts)
    return result
