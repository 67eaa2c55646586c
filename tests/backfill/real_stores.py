"""The two real stores the backfill's remote write is tested against, Debian's Prometheus
(its remote-write receiver on, with an out-of-order window) and VictoriaMetrics, each on a port
it binds itself (`bench.ports.bound_port`), read back sample by sample; bench.backfill starts
them too."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.ports import bound_port

# series -> [(unix seconds, value)]; a series is its sorted (name, value) pairs.
Samples = dict[tuple[tuple[str, str], ...], list[tuple[float, float]]]


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run `make tools`")
    return found


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


def start(name: str, argv: list[str], tmp: Path, ready: str) -> RealStore:
    """`argv` (listening on 127.0.0.1:0) with its log in `tmp`, once `ready` answers 200;
    stopped again if it never does."""
    log = tmp / f"{name}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, cwd=tmp, stdout=sink, stderr=sink)
    store = RealStore(name, "", process)
    try:
        try:
            store.root = f"http://127.0.0.1:{bound_port(process)}"
        except RuntimeError as exc:
            pytest.fail(f"{exc}\n" + log.read_text(errors="replace")[-2000:])
        wait_until_up(store.root, process, log, ready)
    except BaseException:
        store.stop()
        raise
    return store


def start_prometheus(tmp: Path, ooo_window: str | None = None) -> RealStore:
    """Prometheus on `tmp/data`; with `ooo_window`, its remote-write receiver on and that
    out-of-order window."""
    config = tmp / "prometheus.yml"
    receiver = []
    if ooo_window is None:
        config.write_text("global: {}\n")
    else:
        config.write_text(f"storage:\n  tsdb:\n    out_of_order_time_window: {ooo_window}\n")
        receiver = ["--web.enable-remote-write-receiver"]
    argv = [
        tool("prometheus"),
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp / 'data'}",
        "--web.listen-address=127.0.0.1:0",
        *receiver,
    ]
    return start("prometheus", argv, tmp, "/-/ready")


def start_victoria(tmp: Path) -> RealStore:
    argv = [
        tool("victoria-metrics"),
        f"-storageDataPath={tmp / 'vm'}",
        "-httpListenAddr=127.0.0.1:0",
        # Raw samples are read back at once: no cache, no latency offset.
        "-search.disableCache",
        "-search.latencyOffset=0s",
    ]
    return start("victoria", argv, tmp, "/health")


def promtool_blocks(tmp: Path, name: str) -> None:
    """`promtool tsdb create-blocks-from openmetrics` of `tmp/name` into `tmp/data`."""
    blocks = subprocess.run(
        [tool("promtool"), "tsdb", "create-blocks-from", "openmetrics", name, "data"],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert blocks.returncode == 0, blocks.stderr
