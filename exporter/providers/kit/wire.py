"""Names read from a reply, sent back upstream as the bytes they came as.

`decode` turns an invalid byte of a reply into a lone surrogate U+DC80-U+DCFF
(`surrogateescape`), and a JSON escape `\\ud800` stays the lone surrogate it names. A strict
UTF-8 encode of such a job id or queue raises while the request is built, which would fail the
whole poll for one odd name. So a U+DC80-U+DCFF goes back as its byte, and any other lone
surrogate as its JSON escape in a JSON body (`json_wire`) or as its UTF-8-like bytes in a URL
(`wire_bytes`). `unwire` is the inverse, for a server (the simulator) reading such requests.
"""

from __future__ import annotations

import codecs
import json
from typing import Any, Final

WIRE: Final = "tje-wire"
JSON_WIRE: Final = "tje-json-wire"
UNWIRE: Final = "tje-unwire"


def _encoder(escape: bool) -> Any:
    def handler(exc: UnicodeError) -> tuple[bytes, int]:
        if not isinstance(exc, UnicodeEncodeError):
            raise exc
        out = bytearray()
        for char in exc.object[exc.start : exc.end]:
            point = ord(char)
            if 0xDC80 <= point <= 0xDCFF:
                out.append(point - 0xDC00)
            elif escape:
                out += f"\\u{point:04x}".encode("ascii")
            else:
                out += char.encode("utf-8", "surrogatepass")
        return bytes(out), exc.end

    return handler


def _unwire(exc: UnicodeError) -> tuple[str, int]:
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, start = exc.object, exc.start
    lead = data[start : start + 3]
    if len(lead) == 3 and lead[0] == 0xED and 0xA0 <= lead[1] <= 0xBF and 0x80 <= lead[2] <= 0xBF:
        return bytes(lead).decode("utf-8", "surrogatepass"), start + 3
    return chr(0xDC00 + data[start]), start + 1


codecs.register_error(WIRE, _encoder(escape=False))
codecs.register_error(JSON_WIRE, _encoder(escape=True))
codecs.register_error(UNWIRE, _unwire)


def wire_bytes(value: str) -> bytes:
    """`value`'s bytes for a URL or a signature."""
    return value.encode("utf-8", WIRE)


# `json.dumps(..., separators=...)` would build an encoder per request body.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def json_wire(data: Any) -> bytes:
    """`data` as a compact JSON body, non-ASCII as UTF-8 (as Go writes it)."""
    text = _ENCODER.encode(data)
    return text.encode("utf-8", JSON_WIRE)


def unwire(data: bytes) -> str:
    """The string `wire_bytes` or `json_wire` made `data` from."""
    return data.decode("utf-8", UNWIRE)
