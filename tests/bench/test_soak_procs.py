"""bench/soak/procs.py: the soak's exporter keeps one port for the whole run, picked free before
it starts; when another process takes that port first, the exporter starts again on another."""

from __future__ import annotations

import socket
import urllib.request
from pathlib import Path

from bench.soak.clock import SharedClock
from bench.soak.procs import Exporter
from bench.soak.schedule import TARGETS

# Nothing answers there: the exporter listens whatever its targets do.
NOBODY = "http://127.0.0.1:9"


def test_an_exporter_whose_port_was_taken_listens_on_another(tmp_path: Path) -> None:
    clock = SharedClock(1.0, tmp_path)
    clock.start()
    exporter = Exporter(clock, tmp_path, dict.fromkeys(TARGETS, NOBODY))
    taken = exporter.port
    try:
        with socket.socket() as taker:
            taker.bind(("127.0.0.1", taken))
            taker.listen()
            exporter.write_keys("old")
            exporter.write_config()
            exporter.jobs_file.write_text("jobs: []\n")
            exporter.start()
            exporter.listening(wait=60)
            assert exporter.generation == 2 and exporter.port != taken
            assert "cannot listen" in exporter.logs[0].read_text()
            with urllib.request.urlopen(exporter.url + "/-/healthy", timeout=10) as reply:
                assert reply.status == 200
    finally:
        exporter.stop()
        clock.stop()
