"""Remote write seen from the store's side: Google's protobuf runtime reads what the backfill
sends (from a descriptor of prompb's four messages built here, no generated code), a fake store
on a real socket records every request and answers as a test tells it, and the two real stores
(Prometheus' receiver, VictoriaMetrics) started on free ports and read back sample by sample."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cramjam
import pytest
from aiohttp import web
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

# series -> [(unix seconds, value)]; a series is its sorted (name, value) pairs.
Samples = dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run `make tools`")
    return found


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
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    store.url = f"http://127.0.0.1:{port}/api/v1/write"
    return runner


def get_json(url: str, **params: str) -> Any:
    with urllib.request.urlopen(f"{url}?{urllib.parse.urlencode(params)}", timeout=30) as r:
        return json.load(r)


def wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path, path: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")[-2000:]
        try:
            with urllib.request.urlopen(f"{url}{path}", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail(f"{url} did not come up:\n" + log.read_text(errors="replace")[-2000:])


@dataclass
class RealStore:
    name: str
    root: str
    process: subprocess.Popen[bytes]

    @property
    def write_url(self) -> str:
        return f"{self.root}/api/v1/write"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def write_requests(self) -> int:
        """The write requests the store itself counted."""
        with urllib.request.urlopen(f"{self.root}/metrics", timeout=10) as r:
            text = r.read().decode()
        wanted = (
            'prometheus_http_requests_total{code="204",handler="/api/v1/write"}'
            if self.name == "prometheus"
            else 'vm_http_requests_total{path="/api/v1/write"}'
        )
        return sum(
            int(float(line.split()[-1])) for line in text.splitlines() if line.startswith(wanted)
        )

    def samples(self, matcher: str, since: float, until: float) -> Samples:
        """Every raw sample of the series `matcher` selects in [since, until]."""
        if self.name == "prometheus":
            span = int(until - since) + 1
            data = get_json(
                f"{self.root}/api/v1/query", query=f"{matcher}[{span}s]", time=str(until)
            )["data"]["result"]
            return {
                tuple(sorted(r["metric"].items())): [(float(t), float(v)) for t, v in r["values"]]
                for r in data
            }
        urllib.request.urlopen(
            urllib.request.Request(f"{self.root}/internal/force_flush"), timeout=10
        ).close()
        params = {"match[]": matcher, "start": str(int(since)), "end": str(int(until) + 1)}
        url = f"{self.root}/api/v1/export?{urllib.parse.urlencode(params)}"
        out: Samples = {}
        with urllib.request.urlopen(url, timeout=30) as r:
            for line in r:
                row = json.loads(line)
                points = [(t / 1000, float(v)) for t, v in zip(row["timestamps"], row["values"])]
                out[tuple(sorted(row["metric"].items()))] = sorted(points)
        return out


def start_prometheus(tmp: Path, ooo_window: str) -> RealStore:
    port = free_port()
    config = tmp / "prometheus.yml"
    config.write_text(f"storage:\n  tsdb:\n    out_of_order_time_window: {ooo_window}\n")
    log = tmp / "prometheus.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--web.enable-remote-write-receiver",
            ],
            stdout=sink,
            stderr=sink,
        )
    store = RealStore("prometheus", f"http://127.0.0.1:{port}", process)
    try:
        wait_until_up(store.root, process, log, "/-/ready")
    except BaseException:
        store.stop()
        raise
    return store


def start_victoria(tmp: Path) -> RealStore:
    port = free_port()
    log = tmp / "victoria.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                tool("victoria-metrics"),
                f"-storageDataPath={tmp / 'vm'}",
                f"-httpListenAddr=127.0.0.1:{port}",
                # Raw samples are read back at once: no cache, no latency offset.
                "-search.disableCache",
                "-search.latencyOffset=0s",
            ],
            stdout=sink,
            stderr=sink,
        )
    store = RealStore("victoria", f"http://127.0.0.1:{port}", process)
    try:
        wait_until_up(store.root, process, log, "/health")
    except BaseException:
        store.stop()
        raise
    return store


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
