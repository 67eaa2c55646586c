"""Label values from upstream strings: valid UTF-8, bounded, and never two strings made one.

A value that can be exported as it is (valid UTF-8, at most `MAX_LABEL_LENGTH` characters) is
kept unchanged. Any other is changed injectively: lone surrogates (which is what an invalid byte
becomes, see `decode`) are replaced by U+FFFD, the text is cut to leave room, and `~` and 12 hex
digits of a hash of the original are appended. So the same upstream string always gives the same
label, and two different ones never give the same label by cleaning. A lossy clean (`a\\ud800`
and `a\\ud801` both to `a?`, or two 1,100-character pod names with a common 1,024-character
prefix cut to one) makes duplicate series: 45 in one exposition of such names, which Prometheus
2.42 silently merges (14 `training_pod_info` lines into 9 series). Only an upstream value that
is itself such a cleaned form can still collide; the exposition's last guard
(`exporter.collector`) drops and counts that.

1,024 characters: long enough for any real name, short enough that a runaway value (a
100,000-character `gpuName` from Alaya, say) cannot bloat every scrape.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

MAX_LABEL_LENGTH: Final = 1024
_HASH_BYTES: Final = 6
_MARK: Final = "~"
_KEEP: Final = MAX_LABEL_LENGTH - len(_MARK) - 2 * _HASH_BYTES
_SURROGATE = re.compile("[\ud800-\udfff]")


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
