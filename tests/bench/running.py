"""Runs a benchmark module as its own process, as a user would, for the smoke tests."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO, cli_env

NUMBER = r"\d+(?:\.\d+)?"


def run(*command: str, timeout: float) -> str:
    """`python -m *command` from the repository; its stdout, once it exits 0."""
    done = subprocess.run(
        [sys.executable, "-m", *command],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
