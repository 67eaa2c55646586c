"""yamllint on the YAML under deploy/ (the Helm templates are Go templates and are skipped)."""

from __future__ import annotations

import subprocess
import sys

from deploy_helpers import DEPLOY, REPO


def test_yaml_under_deploy_is_lint_clean() -> None:
    config = DEPLOY / ".yamllint"
    listed = subprocess.run(
        [sys.executable, "-m", "yamllint", "--list-files", "-c", str(config), "deploy"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    ).stdout.split()
    assert "deploy/prometheus/alerts.yaml" in listed
    assert "deploy/helm/training-job-exporter/values.yaml" in listed
    assert not [path for path in listed if "/templates/" in path]
    result = subprocess.run(
        [sys.executable, "-m", "yamllint", "--strict", "-c", str(config), "deploy"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
