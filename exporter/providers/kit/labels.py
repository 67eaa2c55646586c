"""Label values from upstream strings: valid UTF-8, bounded, and never two strings made one.

A value that can be exported as it is (valid UTF-8, at most `MAX_LABEL_LENGTH` characters) is
kept unchanged. Any other is changed injectively: lone surrogates (which is what an invalid
byte becomes, see `decode`) are replaced by U+FFFD, the text is cut to leave room, and `~` and
12 hex digits of a hash of the original are appended. So the same upstream string always
gives the same label, and two different ones never give the same label by cleaning: before,
`a\\ud800` and `a\\ud801` both became `a?` and two 1,100-character pod names with a common
1,024-character prefix became one, which made 45 duplicate series in one exposition (and
Prometheus 2.42 silently merged 14 `training_pod_info` lines into 9 series). Only an upstream
value that is itself such a cleaned form can still collide; the exposition's last guard
(`exporter.collector`) drops and counts that.

1,024 characters: long enough for any real name, short enough that a runaway value (Alaya
once sent a 100,000-character `gpuName`) cannot bloat every scrape.
"""

from __future__ import annotations

import codecs
import hashlib
import re
from typing import Final

MAX_LABEL_LENGTH: Final = 1024
_HASH_BYTES: Final = 6
_MARK: Final = "~"
_KEEP: Final = MAX_LABEL_LENGTH - len(_MARK) - 2 * _HASH_BYTES
_SURROGATE = re.compile("[\ud800-\udfff]")
WIRE: Final = "tje-wire"


def label(value: str) -> str:
    """`value` as a label value: itself when it is valid and short enough."""
    if len(value) <= MAX_LABEL_LENGTH and (value.isascii() or _is_valid(value)):
        return value
    return _changed(value)


def _is_valid(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _changed(value: str) -> str:
    original = value.encode("utf-8", "surrogatepass")
    digest = hashlib.blake2b(original, digest_size=_HASH_BYTES).hexdigest()
    return _SURROGATE.sub("\ufffd", value[:_KEEP]) + _MARK + digest


def _wire_error(exc: UnicodeError) -> tuple[bytes, int]:
    """Encode surrogates back to what they came from: U+DC80-U+DCFF to the invalid byte they
    stand for (`surrogateescape`), any other as the escaped code point's UTF-8-like bytes."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = bytearray()
    for char in exc.object[exc.start : exc.end]:
        point = ord(char)
        if 0xDC80 <= point <= 0xDCFF:
            out.append(point - 0xDC00)
        else:
            out += char.encode("utf-8", "surrogatepass")
    return bytes(out), exc.end


codecs.register_error(WIRE, _wire_error)


def wire_bytes(value: str) -> bytes:
    """`value` as the bytes to send upstream: a name read from a reply goes back as it came,
    invalid bytes included (a strict encode raised, failing the whole poll)."""
    return value.encode("utf-8", WIRE)
