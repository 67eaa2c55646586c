"""A benchmark run's scratch directory (its configuration, the exporter's log, the simulator's
request log), removed when the process exits: runs in the suite's smoke tests leave nothing in
the temporary directory."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path


def scratch(prefix: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
