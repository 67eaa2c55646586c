"""Sample lines as prometheus-client writes them: label strings, values, and a cache of both.

A line is `name{a="1",b="2"} value\\n`: the label string sorted by name and escaped as the
encoders escape it, the value as `floatToGoString` writes it. Within a line only the value
follows the last space (a label value's own spaces sit before it, and its newlines are escaped),
which `exporter.rendering.parts` relies on to write a part's lines again with new values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.utils import floatToGoString

from exporter.model import Sample


def format_value(number: float) -> str:
    """`number` as prometheus-client writes it (`floatToGoString`, Go's formatting): Python's
    own repr, but for infinities, NaN and positive numbers of 7 or more integer digits."""
    if type(number) is float:
        text = repr(number)
        if text[-1] <= "9" and (text[0] == "-" or text.find(".") < 7):
            return text
    return _go_string(number)


_go_string: Callable[[float], str] = floatToGoString


def escape_label_value(value: str) -> str:
    # prometheus-client's escaping of label values, the same in text 0.0.4 and OpenMetrics.
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def label_string(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """`{a="1",b="2"}` as prometheus-client writes `dict(zip(names, values))`: sorted by name."""
    pairs = sorted(dict(zip(names, values)).items())
    if not pairs:
        return ""
    return "{" + ",".join([f'{k}="{escape_label_value(v)}"' for k, v in pairs]) + "}"


@dataclass(slots=True)
class LineCache:
    """Label strings and formatted values, shared by the parts rendered in one change."""

    labels: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = field(default_factory=dict)
    values: dict[float, str] = field(default_factory=dict)
    ends: dict[float, bytes] = field(default_factory=dict)
    job_index: dict[tuple[str, ...], int] = field(default_factory=dict)

    def label(self, names: tuple[str, ...], values: tuple[str, ...]) -> str:
        key = (names, values)
        text = self.labels.get(key)
        if text is None:
            text = self.labels[key] = label_string(names, values)
        return text

    def value(self, number: float) -> str:
        text = self.values.get(number)
        if text is None:
            text = format_value(number)
            # Not 0: 0.0 == -0.0 but they print differently.
            if number:
                self.values[number] = text
        return text

    def end(self, number: float) -> bytes:
        """What follows a line's last space: its value and the newline."""
        text = self.ends.get(number)
        if text is None:
            text = f"{format_value(number)}\n".encode()
            if number:
                self.ends[number] = text
        return text

    def key(self, names: tuple[str, ...], values: tuple[str, ...], label: str) -> str:
        """The part key of a sample: its job_id value (as the label dict holds it), or its
        whole label string when it has none (\\0 keeps the two apart)."""
        index = self.job_index.get(names)
        if index is None:
            index = len(names) - 1 - names[::-1].index("job_id") if "job_id" in names else -1
            self.job_index[names] = index
        if 0 <= index < len(values):
            return values[index]
        return "\0" + label


def lines(name: str, kept: Iterable[tuple[Sample, str]], cache: LineCache) -> bytes:
    """The lines of `kept` samples (each with its label string), all of family `name`."""
    return b"".join([f"{name}{label} {cache.value(s.value)}\n".encode() for s, label in kept])


# Positive values from here up are written with an exponent (`format_value`); below it, and
# for every negative one, Python's repr is the text.
_EXPONENT_FROM = 1e6


def heads(text: bytes | memoryview) -> list[bytes]:
    """Each line of `text` up to and with its last space: the line but its value."""
    return [line[: line.rindex(b" ") + 1] for line in bytes(text).split(b"\n")[:-1]]


def with_values(starts: list[bytes], numbers: Sequence[float], cache: LineCache) -> bytes:
    """Lines of `starts` (from `heads`) with `numbers` as their values: the values of a block
    formatted in one pass where all are finite and below `_EXPONENT_FROM`, else one by one."""
    if not starts:
        return b""
    total = sum(numbers)
    if total - total == 0.0 and max(numbers) < _EXPONENT_FROM:
        values = "\n".join(map(repr, numbers)).encode().split(b"\n")
    else:
        values = [cache.end(number)[:-1] for number in numbers]
    pieces: list[bytes] = [b"\n"] * (3 * len(starts))
    pieces[::3] = starts
    pieces[1::3] = values
    return b"".join(pieces)
