"""The chunker: each family's lines cut into chunks at content-defined boundaries.

A family's lines are its parts' lines in view order. A chunk ends after a part whose mark (the
hash of its place) is 0 mod CHUNK, or after MAX_CHUNK parts, so a changed part changes its
chunk only: the chunk's text is joined again and deflated on its own (`exporter.gzipjoin`), and
every other chunk is kept as it is. One copy of the lines is kept, in the chunks; where each
part's lines are is kept beside them, for the parts rendered again (`parts.rewrite`) and the
chunks joined again.

Above TEXT_LIMIT bytes of lines in all (~150k series), a chunk keeps its deflate alone, with
its text's length and CRC: the lines are ~15 x their deflate, the largest thing a replica
holds. Its text is inflated when needed: once per render for a chunk joined again or a part
rendered again from its lines, and chunk by chunk while an identity scrape is written
(`Chunk.text`).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from exporter import gzipjoin
from exporter.gzipjoin import Deflated
from exporter.rendering.guard import Key, Owners, guarded
from exporter.rendering.lines import LineCache
from exporter.rendering.parts import RenderedPart, Walk

# Parts per chunk on average, and at most: ~22 KB of text per chunk at 100k series, which
# compresses to 12 % more than the whole text at once (4 per chunk: 24 %; 1: 94 %), in 0.1 ms.
CHUNK = 8
MAX_CHUNK = 64
# Bytes of lines in all above which chunks keep their deflate alone: above 100k series' ~21 MB,
# so the design point's identity scrapes write kept text, and below 400k series' ~87 MB.
TEXT_LIMIT = 32 * 1024 * 1024


@dataclass(slots=True, eq=False)
class Chunk:
    """Consecutive parts' lines of one family: their deflate, their text's length and CRC,
    where each part's are, and the text itself unless the chunker let it go (`data` None).

    What the chunk holds never changes; only whether its text is kept as text does, so a
    rendering that holds it can be read while a render goes on."""

    parts: tuple[RenderedPart, ...]
    data: bytes | None
    raw: bytes
    length: int
    crc: int
    ends: tuple[int, ...]
    # Parts whose lines here went through the guard with other parts' (some may be missing).
    exact: tuple[bool, ...]
    # Samples the guard left out of these lines, per provider.
    duplicates: tuple[tuple[str, int], ...]

    def __len__(self) -> int:
        return self.length

    def text(self) -> bytes:
        """The chunk's lines: kept, or inflated from its deflate."""
        data = self.data
        return data if data is not None else gzipjoin.inflate(self.raw, self.length)

    def lines_of(self, part: RenderedPart, text: bytes) -> memoryview:
        """`part`'s lines in `text`, this chunk's text."""
        index = self.parts.index(part)  # by identity: parts compare as objects
        start = self.ends[index - 1] if index else 0
        return memoryview(text)[start : self.ends[index]]


def text_of(piece: bytes | Chunk, inflated: Callable[[int], None] | None = None) -> bytes:
    """A rendering's part as text; `inflated` is told the length of a chunk's text that had to
    be inflated from its deflate."""
    if isinstance(piece, bytes):
        return piece
    text = piece.data
    if text is None:
        text = piece.text()
        if inflated is not None:
            inflated(len(text))
    return text


@dataclass(frozen=True, slots=True)
class FamilyRun:
    """A family's chunks in order, and their text's length and CRC as one deflate piece
    (`raw` empty: the chunks hold it)."""

    chunks: tuple[Chunk, ...]
    summary: Deflated
    # Its parts' identities, where each chunk ends among them, whether none went through
    # the guard with other parts', and the samples the guard left out per provider.
    ids: tuple[int, ...]
    ends: tuple[int, ...]
    plain: bool
    duplicates: Mapping[str, int]


@dataclass(slots=True)
class _Family:
    """One family's chunking in one render."""

    name: str
    parts: list[RenderedPart]
    providers: list[str]
    contested: set[Key]
    plain: bool
    walk: Walk

    def exact(self, batch: Sequence[RenderedPart]) -> list[bool]:
        """Which of `batch` go through the guard with the family's other parts."""
        if self.plain:
            return [False] * len(batch)
        repeated, contested = self.walk.repeated, self.contested
        return [id(p) in repeated or not contested.isdisjoint(p.info.keys) for p in batch]


class _Prior:
    """A family's chunks of the render before, found for the parts between two places of this
    one: where they were (parts replaced in place leave the rest where it was), else by the
    parts they hold (parts came or went before them). `there`: the chunk that held the same
    places as the last `find`, whatever its parts."""

    def __init__(self, old: FamilyRun | None, ids: tuple[int, ...]) -> None:
        self._old, self._ids = old, ids
        self._next = 0  # the first old chunk that may start at or after the place asked
        self._held: dict[tuple[int, ...], Chunk] | None = None
        self.there: Chunk | None = None

    def find(self, start: int, end: int) -> Chunk | None:
        old = self._old
        if old is None:
            return None
        ends, index = old.ends, self._next
        while index < len(ends) and ends[index] <= start:
            index += 1
        self._next = index
        begin = ends[index - 1] if index else 0
        ids = self._ids[start:end]
        there = begin == start and index < len(ends) and ends[index] == end
        self.there = old.chunks[index] if there else None
        if there and old.ids[start:end] == ids:
            return old.chunks[index]
        if self._held is None:
            self._held = {tuple(map(id, c.parts)): c for c in old.chunks}
        return self._held.get(ids)


class Chunker:
    """Each family's chunks of the last render, and where each live part's lines are; their
    text kept while the last render's lines were `text_limit` bytes or fewer in all."""

    def __init__(self, gzip_level: int, text_limit: int = TEXT_LIMIT) -> None:
        self._gzip_level = gzip_level
        self._limit = text_limit
        # Whether chunks made now let their text go, and the lines of this render so far.
        self._textless = False
        self._held = 0
        # The text inflated in this render, of chunks that keep none.
        self._texts: dict[Chunk, bytes] = {}
        self._runs: dict[str, FamilyRun] = {}
        # Per family, the chunk that holds each live part's lines.
        self._where: dict[str, dict[int, Chunk]] = {}

    def lines_of(self, name: str, part: RenderedPart) -> memoryview | None:
        """`part`'s lines in family `name`, unless the guard cut them with other parts'."""
        chunk = self._where.get(name, {}).get(id(part))
        return chunk.lines_of(part, self._text(chunk)) if chunk is not None else None

    def _text(self, chunk: Chunk) -> bytes:
        """The chunk's text, inflated at most once a render."""
        if chunk.data is not None:
            return chunk.data
        text = self._texts.get(chunk)
        if text is None:
            text = self._texts[chunk] = chunk.text()
        return text

    def forget(self, part: RenderedPart) -> None:
        for name in part.info.families:
            self._where.get(name, {}).pop(id(part), None)

    def runs(self, walk: Walk, owners: Owners) -> tuple[dict[str, FamilyRun], Counter[str]]:
        """Each family's run for `walk`, and the samples the guard left out, per provider."""
        duplicates: Counter[str] = Counter()
        runs: dict[str, FamilyRun] = {}
        self._textless, self._held = self._held > self._limit, 0
        for name, (parts, providers) in walk.order.items():
            if not parts:
                continue
            contested = owners.of(name)
            repeated = walk.repeated
            plain = not contested and (not repeated or repeated.isdisjoint(map(id, parts)))
            family = _Family(name, parts, providers, contested, plain, walk)
            run = runs[name] = self._run(family)
            duplicates.update(run.duplicates)
            self._held += run.summary.length
            self._textless = self._textless or self._held > self._limit
            # The family's previous chunks go now, not after every family is done: a full
            # change would otherwise hold two generations of lines (+20 MB at 100k).
            old = self._runs.get(name)
            if old is not None and old is not run:
                if self._texts:
                    for chunk in old.chunks:
                        self._texts.pop(chunk, None)
                self._runs[name] = run
        self._runs = runs
        self._settle(runs)
        return runs, duplicates

    def _settle(self, runs: Mapping[str, FamilyRun]) -> None:
        """Every chunk's text let go if the lines are over the limit in all, else kept."""
        textless = self._held > self._limit
        for run in runs.values():
            for chunk in run.chunks:
                if textless:
                    chunk.data = None
                elif chunk.data is None:
                    chunk.data = chunk.text()
        self._texts.clear()

    def _run(self, family: _Family) -> FamilyRun:
        """The family's chunks: the previous ones where their parts are the same."""
        name, parts = family.name, family.parts
        ids = tuple(map(id, parts))
        old = self._runs.get(name)
        if family.plain and old is not None and old.plain and old.ids == ids:
            return old
        prior = _Prior(old, ids)
        seen: dict[str, set[str]] = {}
        made: list[Chunk] = []
        ends: list[int] = []
        start = 0
        for end, part in enumerate(parts, start=1):
            if part.mark % CHUNK and end - start < MAX_CHUNK and end < len(parts):
                continue
            made.append(self._chunk_of(family, start, end, prior, seen))
            ends.append(end)
            start = end
        duplicates: Counter[str] = Counter()
        for chunk in made:
            if chunk.duplicates:
                duplicates.update(dict(chunk.duplicates))
        summary = self._summary(made)
        return FamilyRun(tuple(made), summary, ids, tuple(ends), family.plain, dict(duplicates))

    def _chunk_of(
        self,
        family: _Family,
        start: int,
        end: int,
        prior: _Prior,
        seen: dict[str, set[str]],
    ) -> Chunk:
        """The chunk of the family's parts[start:end]: the previous one if it holds them."""
        batch = family.parts[start:end]
        exact = family.exact(batch)
        clash = any(exact)
        chunk = None if clash else prior.find(start, end)
        if chunk is None:
            there = None if clash else prior.there
            same = self._same_lines(family, batch, there) if there is not None else None
            chunk = same or self._rechunk(family, start, end, exact, seen)
            where = self._where.setdefault(family.name, {})
            for index, part in enumerate(batch):
                if exact[index]:
                    where.pop(id(part), None)
                else:
                    where[id(part)] = chunk
        return chunk

    def _same_lines(self, family: _Family, batch: list[RenderedPart], old: Chunk) -> Chunk | None:
        """`old`'s lines, deflate and all, for `batch`, when the parts of `batch` that are not
        `old`'s were rendered with the same lines in this family as those they replace (a job
        read again writes some families' lines as they were: its listing's, but for its run
        time); None otherwise."""
        if any(old.exact):
            return None
        fresh, name, text = family.walk.fresh, family.name, None
        for part, was in zip(batch, old.parts, strict=True):
            if part is was:
                continue
            block = fresh.get(id(part), {}).get(name)
            text = text if text is not None else self._text(old)
            if block is None or block != old.lines_of(was, text):
                return None
        c = old
        return Chunk(tuple(batch), c.data, c.raw, c.length, c.crc, c.ends, c.exact, c.duplicates)

    def _rechunk(
        self, family: _Family, start: int, end: int, exact: list[bool], seen: dict[str, set[str]]
    ) -> Chunk:
        """A chunk of the family's lines of parts[start:end]: each part's from its rendering if
        fresh, from the chunk that held them, or through the guard with `seen` if `exact`."""
        name, cache = family.name, family.walk.cache
        blocks: list[bytes | memoryview] = []
        duplicates: Counter[str] = Counter()
        batch = family.parts[start:end]
        for part, provider, again in zip(batch, family.providers[start:end], exact, strict=True):
            if again:
                dropped: Counter[str] = Counter()
                blocks.append(guarded(name, part.samples, seen, cache, dropped))
                duplicates[provider] += dropped[name]
                continue
            duplicates[provider] += part.info.duplicates.get(name, 0)
            blocks.append(self._block(name, part, family.walk.fresh, cache))
        counts = tuple((p, n) for p, n in duplicates.items() if n)
        return self._chunk(tuple(batch), blocks, exact, counts)

    def _block(
        self, name: str, part: RenderedPart, fresh: dict[int, dict[str, bytes]], cache: LineCache
    ) -> bytes | memoryview:
        new = fresh.get(id(part))
        # A fresh part's lines are used once (a repeated one goes through the guard).
        block = new.pop(name, None) if new is not None else self.lines_of(name, part)
        # None: its lines were cut by the guard last time.
        if block is None:
            block = guarded(name, part.samples, {}, cache, Counter())
        return block

    def _chunk(
        self,
        parts: tuple[RenderedPart, ...],
        blocks: list[bytes | memoryview],
        exact: list[bool],
        duplicates: tuple[tuple[str, int], ...],
    ) -> Chunk:
        ends: list[int] = []
        end = 0
        for block in blocks:
            end += len(block)
            ends.append(end)
        data = b"".join(blocks)
        raw = gzipjoin.raw_deflate(data, self._gzip_level)
        kept = None if self._textless else data
        crc = zlib.crc32(data)
        return Chunk(parts, kept, raw, end, crc, tuple(ends), tuple(exact), duplicates)

    @staticmethod
    def _summary(chunks: list[Chunk]) -> Deflated:
        """The chunks' text as one piece: their CRCs combined, no text read."""
        crc = length = 0
        for chunk in chunks:
            crc = gzipjoin.crc_combine(crc, chunk.crc, chunk.length)
            length += chunk.length
        return Deflated(b"", length, crc, gzipjoin.shift_of(length))
