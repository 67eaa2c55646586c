"""Remote write seen from the store's side: Google's protobuf runtime reads what the backfill
sends (from a descriptor of prompb's four messages built here, no generated code), and a fake
store on a real socket records every request and answers as a test tells it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cramjam
from aiohttp import web
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from tests.backfill.real_stores import Samples


def _message_classes() -> Any:
    f = descriptor_pb2.FileDescriptorProto(name="prompb_test.proto", package="prometheus")
    F = descriptor_pb2.FieldDescriptorProto
    repeated, optional = F.LABEL_REPEATED, F.LABEL_OPTIONAL

    def message(name: str, *fields: tuple[str, int, int, int, str]) -> None:
        m = f.message_type.add(name=name)
        for fname, number, label, kind, type_name in fields:
            added = m.field.add(name=fname, number=number, label=label, type=kind)
            if type_name:
                added.type_name = type_name

    message(
        "Label", ("name", 1, optional, F.TYPE_STRING, ""), ("value", 2, optional, F.TYPE_STRING, "")
    )
    message(
        "Sample",
        ("value", 1, optional, F.TYPE_DOUBLE, ""),
        ("timestamp", 2, optional, F.TYPE_INT64, ""),
    )
    message(
        "TimeSeries",
        ("labels", 1, repeated, F.TYPE_MESSAGE, ".prometheus.Label"),
        ("samples", 2, repeated, F.TYPE_MESSAGE, ".prometheus.Sample"),
    )
    message("WriteRequest", ("timeseries", 1, repeated, F.TYPE_MESSAGE, ".prometheus.TimeSeries"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("prometheus.WriteRequest"))


WriteRequest = _message_classes()


def parse(body: bytes) -> list[tuple[tuple[tuple[str, str], ...], list[tuple[float, float]]]]:
    """A WriteRequest's series, as Google's runtime reads it (milliseconds back to seconds)."""
    request = WriteRequest()
    request.ParseFromString(body)
    return [
        (
            tuple((label.name, label.value) for label in ts.labels),
            [(s.timestamp / 1000, s.value) for s in ts.samples],
        )
        for ts in request.timeseries
    ]


@dataclass
class Received:
    headers: dict[str, str]
    series: list[tuple[tuple[tuple[str, str], ...], list[tuple[float, float]]]]
    status: int
    at: float = field(default_factory=time.monotonic)

    @property
    def samples(self) -> int:
        return sum(len(points) for _, points in self.series)


# Answers a request (its number from 1, its series): None to take it, else (status, body,
# headers).
Answerer = Callable[[int, Received], "tuple[int, str, dict[str, str]] | None"]


@dataclass
class FakeStore:
    """A remote-write receiver on a real socket: every request it got, and what it kept."""

    answer: Answerer | None = None
    requests: list[Received] = field(default_factory=list)
    # Hold the request with this number until `release` is set.
    hold: int | None = None
    held: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    @property
    def kept(self) -> Samples:
        out: Samples = {}
        for request in self.requests:
            if request.status < 300:
                for labels, points in request.series:
                    out.setdefault(labels, []).extend(points)
        return out

    async def handle(self, request: web.Request) -> web.Response:
        body = cramjam.snappy.decompress_raw(await request.read())
        received = Received(dict(request.headers), parse(bytes(body)), 204)
        self.requests.append(received)
        if self.hold == len(self.requests):
            self.held.set()
            await self.release.wait()
        answer = self.answer(len(self.requests), received) if self.answer else None
        if answer is None:
            return web.Response(status=204)
        received.status = answer[0]
        return web.Response(status=answer[0], text=answer[1], headers=answer[2])


async def serve(store: FakeStore) -> web.AppRunner:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_post("/api/v1/write", store.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    store.url = f"http://127.0.0.1:{runner.addresses[0][1]}/api/v1/write"
    return runner


def openmetrics_samples(text: str) -> Samples:
    """The samples of an OpenMetrics file the backfill wrote, as a store holds them: a label
    whose value is empty is no label."""
    out: Samples = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        head, value, at = line.rsplit(" ", 2)
        name, _, labels = head.partition("{")
        pairs = [("__name__", name)]
        for item in _split_labels(labels.removesuffix("}")):
            key, _, quoted = item.partition("=")
            if json.loads(quoted):
                pairs.append((key, json.loads(quoted)))
        out.setdefault(tuple(sorted(pairs)), []).append((float(at), float(value)))
    return out


def _split_labels(text: str) -> list[str]:
    items, current, quoted, escaped = [], "", False, False
    for char in text:
        if char == "," and not quoted:
            items.append(current)
            current = ""
            continue
        current += char
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
    if current:
        items.append(current)
    return items
