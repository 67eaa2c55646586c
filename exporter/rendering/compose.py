"""The per-format composer: each family's HELP/TYPE lines and chunks, as one format writes them.

Both formats share the chunks' sample lines and differ only in their HELP/TYPE lines, which are
the encoder's own. Before it trusts its lines for a format, `FormatCheck` renders a probe sample
both ways (quotes, backslashes, newlines, unicode) for every family and every label-name tuple,
and compares them; any difference (the `dots`/`values` escapings, names the encoder would
rewrite) hands the whole rendering back to the encoder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import Metric

from exporter import gzipjoin
from exporter.gzipjoin import Deflated
from exporter.metrics import MetricSpec
from exporter.rendering.chunks import Chunk, FamilyRun, text_of
from exporter.rendering.lines import format_value, label_string
from exporter.rendering.parts import RenderedPart
from exporter.store import StoreView

Encoder = Callable[[Any], bytes]
Fallback = Callable[[StoreView, Encoder], bytes]
# Label-name tuples checked per format: providers' mappings make a few dozen.
_MAX_NAMES = 1024
# Every character the formats escape, and some they must not.
_PROBE_VALUE = 'say "hi"\\ C:\\dir\\n\nline two ü ✓ \u2028 {},='
_PROBE_NUMBER = 0.125


@dataclass(frozen=True, slots=True)
class Rendering:
    """A store version in one format, never changed: the exposition without its trailer
    (the self-metrics part brings `# EOF`), as parts (HELP/TYPE lines and chunks) and as one
    deflate piece."""

    version: int
    content_type: str
    parts: tuple[bytes | Chunk, ...]
    deflated: Deflated
    gzip_level: int

    def text(self) -> Iterator[bytes]:
        """The exposition's text, part by part: a chunk's inflated as it comes if it keeps
        none, so the whole text is never held at once."""
        return map(text_of, self.parts)


class Families:
    """A collector of given families, to ask an encoder how it writes them."""

    def __init__(self, *families: Metric) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


class FormatCheck:
    """For one format (encoder and content type): each family's HELP/TYPE lines as the
    encoder writes them, and whether the encoder writes a family's and a label-name tuple's
    sample lines as the renderer does (a probe of every character the formats escape)."""

    def __init__(self, encoder: Encoder, content_type: str, help_of: Mapping[str, str]) -> None:
        self.encoder = encoder
        self.content_type = content_type
        self._help = help_of
        self.trailer = encoder(Families()).decode()
        self._headers: dict[str, bytes | None] = {}
        self._names: dict[tuple[str, ...], bool] = {}

    def header(self, spec: MetricSpec) -> bytes | None:
        """The family's HELP/TYPE lines; None if the encoder would write its lines otherwise."""
        if spec.name not in self._headers:
            help_text = self._help[spec.name]
            empty = Metric(spec.family, help_text, spec.kind)
            header = self.encoder(Families(empty)).decode().removesuffix(self.trailer)
            probe = Metric(spec.family, help_text, spec.kind)
            probe.add_sample(spec.name, {"probe": _PROBE_VALUE}, _PROBE_NUMBER)
            label = label_string(("probe",), (_PROBE_VALUE,))
            line = f"{spec.name}{label} {format_value(_PROBE_NUMBER)}\n"
            alike = self.encoder(Families(probe)).decode() == header + line + self.trailer
            self._headers[spec.name] = header.encode() if alike else None
        return self._headers[spec.name]

    def names_alike(self, names: tuple[str, ...]) -> bool:
        if names not in self._names:
            if len(self._names) >= _MAX_NAMES:
                self._names.clear()
            values = tuple(f"{_PROBE_VALUE}{i}" for i in range(len(names)))
            probe = Metric("probe", "Probe.", "gauge")
            probe.add_sample("probe", dict(zip(names, values)), _PROBE_NUMBER)
            empty = self.encoder(Families(Metric("probe", "Probe.", "gauge"))).decode()
            line = f"probe{label_string(names, values)} {format_value(_PROBE_NUMBER)}\n"
            expected = empty.removesuffix(self.trailer) + line + self.trailer
            self._names[names] = self.encoder(Families(probe)).decode() == expected
        return self._names[names]


class Composer:
    """A format's renderings from the families' runs, or from the encoder (`fallback`) while a
    live part or a family is one the format writes otherwise."""

    def __init__(
        self,
        check: FormatCheck,
        specs: Mapping[str, MetricSpec],
        fallback: Fallback,
        gzip_level: int,
    ) -> None:
        self._check = check
        self._specs = specs
        self._fallback = fallback
        self._gzip_level = gzip_level
        self._header_pieces: dict[bytes, Deflated] = {}
        # Live parts with a label-name tuple the format writes otherwise.
        self._odd = 0

    def count(self, part: RenderedPart, step: int) -> None:
        """Count a part in (`step` above 0) or out (below), `abs(step)` times."""
        if not all(self._check.names_alike(n) for n in part.info.label_names):
            self._odd += step

    def compose(self, view: StoreView, runs: Mapping[str, FamilyRun]) -> Rendering:
        check, level = self._check, self._gzip_level
        headers = [(check.header(self._specs[name]), run) for name, run in runs.items()]
        if self._odd or any(header is None for header, _ in headers):
            body = self._fallback(view, check.encoder).removesuffix(check.trailer.encode())
            deflated = gzipjoin.deflate(body, level)
            return Rendering(view.version, check.content_type, (body,), deflated, level)
        parts: list[bytes | Chunk] = []
        pieces: list[Deflated] = []
        raws: list[bytes] = []
        for header, run in headers:
            assert header is not None
            piece = self._header_piece(header)
            parts.append(header)
            parts += run.chunks
            pieces += (piece, run.summary)
            raws.append(piece.raw)
            raws += [chunk.raw for chunk in run.chunks]
        joined = gzipjoin.join(pieces)
        deflated = Deflated(b"".join(raws), joined.length, joined.crc, joined.shift)
        return Rendering(view.version, check.content_type, tuple(parts), deflated, level)

    def _header_piece(self, header: bytes) -> Deflated:
        piece = self._header_pieces.get(header)
        if piece is None:
            piece = self._header_pieces[header] = gzipjoin.deflate(header, self._gzip_level)
        return piece
