"""Remote write once the reading is done: plan a round of the jobs read whole, send every
round's slices oldest first in batches of at most `MAX_SAMPLES`, keep what did not go in the
output file for promtool, and report from the ledgers (so a resumed run reports the whole).

Samples older than the store's window at the moment their slice is sent (`Store.cutoff`) are
kept back, never sent. A refused batch is counted under its reason and kept too; a store that
cannot take anything this run (`StoreStopped`) ends the sending, and the same command goes on
from the first batch it did not take.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from exporter.backfill.plan import OLDER, REFUSED, SENT, Piece, Round, SendState
from exporter.backfill.progress import SendProgress
from exporter.backfill.prompb import compress, write_request
from exporter.backfill.remote_write import RemoteWriteClient
from exporter.backfill.stores import Store

MAX_SAMPLES: Final = 5000


class Interrupted(Exception):
    """Ctrl-C or SIGTERM between two batches."""


@dataclass(slots=True)
class Totals:
    """Samples by what became of them, over every round's ledger."""

    sent: int = 0
    batches: int = 0
    older: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    refused_batches: Counter[str] = field(default_factory=Counter)
    messages: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, rounds: Sequence[Round]) -> Totals:
        totals = cls()
        for entry in (e for r in rounds for e in r.entries):
            samples = int(entry["samples"])
            if entry["result"] == SENT:
                totals.sent += samples
                totals.batches += 1
            elif entry["result"] == REFUSED:
                totals.refused[entry["reason"]] += samples
                totals.refused_batches[entry["reason"]] += 1
                totals.messages.setdefault(entry["reason"], entry["message"])
            elif entry["result"] == OLDER:
                totals.older += samples
        return totals


def split(piece: Piece, cutoff: float | None) -> tuple[Piece | None, Piece | None]:
    """(the points before `cutoff`, the rest) of `piece`, None for an empty part."""
    if cutoff is None or piece.points[0][0] >= cutoff:
        return None, piece
    if piece.points[-1][0] < cutoff:
        return piece, None
    at = next(i for i, p in enumerate(piece.points) if p[0] >= cutoff)
    old = Piece(piece.job, piece.family, piece.labels, piece.points[:at])
    return old, Piece(piece.job, piece.family, piece.labels, piece.points[at:])


def batches(pieces: Iterator[Piece], limit: int = MAX_SAMPLES) -> Iterator[list[Piece]]:
    """`pieces` in order, in lists of at most `limit` points; a longer piece is cut by time."""
    batch: list[Piece] = []
    size = 0
    for piece in pieces:
        points = piece.points
        while points:
            room = limit - size
            batch.append(Piece(piece.job, piece.family, piece.labels, points[:room]))
            size += min(room, len(points))
            points = points[room:]
            if size >= limit:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


class Sender:
    def __init__(
        self,
        send: SendState,
        client: RemoteWriteClient,
        store: Store,
        stop: asyncio.Event,
        progress: SendProgress,
    ) -> None:
        self.send = send
        self.client = client
        self.store = store
        self.stop = stop
        self.progress = progress
        # Samples this run sent.
        self.sent = 0

    async def run(self) -> None:
        """Every slice of every round; `Interrupted` or `StoreStopped` between batches."""
        for rnd in self.send.rounds:
            for start in sorted(rnd.slices):
                await self._slice(rnd, start)

    async def _slice(self, rnd: Round, start: int) -> None:
        if start not in rnd.cutoffs:
            rnd.record({"slice": start, "cutoff": self.store.cutoff(time.time())})
        cutoff = rnd.cutoffs[start]
        new = (p for p in (split(x, cutoff)[1] for x in rnd.pieces(start)) if p is not None)
        for index, batch in enumerate(batches(new)):
            await self._batch(rnd, start, index, batch)
        if cutoff is None or start >= cutoff:
            return
        old = (p for p in (split(x, cutoff)[0] for x in rnd.pieces(start)) if p is not None)
        for index, batch in enumerate(batches(old)):
            # Batches kept back are numbered from -1 down, beside the sent ones.
            key = (start, -1 - index)
            if key not in rnd.done:
                self.send.keep(batch, f"r{rnd.number}s{start}o{index}")
                entry = {"slice": start, "batch": key[1], "samples": _size(batch)}
                rnd.record({**entry, "result": OLDER})
            self._done(_size(batch))

    async def _batch(self, rnd: Round, start: int, index: int, batch: list[Piece]) -> None:
        samples = _size(batch)
        if (start, index) in rnd.done:
            self._done(samples)
            return
        if self.stop.is_set():
            raise Interrupted
        body = compress(write_request((p.labels, p.points) for p in batch))
        answer = await self.client.send(body)
        entry: dict[str, object] = {"slice": start, "batch": index, "samples": samples}
        entry["status"] = answer.status
        if answer.refused is None:
            entry["result"] = SENT
            self.sent += samples
        else:
            self.send.keep(batch, f"r{rnd.number}s{start}b{index}")
            entry.update(result=REFUSED, reason=answer.refused, message=answer.message)
        rnd.record(entry)
        self._done(samples)

    def _done(self, samples: int) -> None:
        retries = sum(self.client.retried.values())
        self.progress.update(samples, self.client.requests, retries)


def _size(batch: Sequence[Piece]) -> int:
    return sum(len(p.points) for p in batch)
