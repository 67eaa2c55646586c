"""The simulator as its own process, for benchmarks: its work must not share their loop."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start_simulator(flags: Sequence[str]) -> tuple[subprocess.Popen[str], str]:
    """`python -m exporter simulate --listen 127.0.0.1:0 FLAGS`, and the URL it serves at."""
    command = [sys.executable, "-m", "exporter", "simulate", "--listen", "127.0.0.1:0", *flags]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    first = process.stdout.readline()
    if "listening on " not in first:
        process.kill()
        raise SystemExit(f"simulator did not start: {first!r}")
    return process, first.split("listening on ", 1)[1].strip()
