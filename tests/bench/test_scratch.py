"""A benchmark's scratch directory is gone once its process exits, whichever way it ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, cli_env

MAKE = (
    "from bench.scratch import scratch; d = scratch('bench-test-'); "
    "(d / 'f').write_text('x'); print(d, flush=True)"
)


@pytest.mark.parametrize("end", ["", "; raise SystemExit(1)", "; 1 / 0"])
def test_the_directory_is_removed_at_exit(end: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MAKE + end], cwd=REPO, env=cli_env(), capture_output=True, text=True
    )
    made = Path(done.stdout.strip())
    assert made.name.startswith("bench-test-")
    assert not made.exists()
