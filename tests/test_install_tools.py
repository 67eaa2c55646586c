""".ci/install-tools, which `make test` and .ci/run both run first: it installs the Debian tools
the tests need as root with apt-get, or stops at once with the command to run.

The script runs for real, with a PATH that holds only bash and stand-ins for the tools it looks
for (`id` and `apt-get` among them, which record how they were called).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / ".ci" / "install-tools"
TOOLS = (
    "prometheus",
    "promtool",
    "prometheus-node-exporter",
    "wrk",
    "nginx",
    "chromium",
    "chromedriver",
    "faketime",
    "victoria-metrics",
)


def fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!{shutil.which('bash')}\n{body}\n", encoding="utf-8")
    path.chmod(0o755)


def run(tmp_path: Path, *, uid: int, present: tuple[str, ...], apt: bool) -> tuple[int, str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake(bin_dir, "id", f"echo {uid}")
    for tool in present:
        fake(bin_dir, tool, "exit 0")
    calls = tmp_path / "apt-calls"
    if apt:
        fake(bin_dir, "apt-get", f'echo "$*" >> {calls}')
    bash = shutil.which("bash")
    assert bash is not None
    result = subprocess.run(
        [bash, str(SCRIPT)],
        env={"PATH": str(bin_dir)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return result.returncode, result.stderr, calls.read_text() if calls.exists() else ""


def test_nothing_to_do_when_every_tool_is_there(tmp_path: Path) -> None:
    assert run(tmp_path, uid=1000, present=TOOLS, apt=True) == (0, "", "")


def test_not_root_stops_at_once_with_the_exact_command(tmp_path: Path) -> None:
    code, stderr, calls = run(tmp_path, uid=1000, present=("wrk", "nginx"), apt=True)
    assert code == 1 and calls == ""
    assert (
        "  sudo apt-get update && sudo apt-get install -y --no-install-recommends "
        "prometheus prometheus-node-exporter chromium chromium-driver faketime victoria-metrics\n"
    ) in stderr


def test_no_apt_get_stops_with_the_debian_command(tmp_path: Path) -> None:
    code, stderr, _ = run(tmp_path, uid=0, present=(), apt=False)
    assert code == 1
    assert "no apt-get" in stderr
    assert "sudo apt-get install -y --no-install-recommends prometheus " in stderr


def test_root_with_apt_get_installs_what_is_missing(tmp_path: Path) -> None:
    code, _, calls = run(tmp_path, uid=0, present=("prometheus", "promtool"), apt=True)
    assert code == 0
    assert calls.splitlines() == [
        "update -qq",
        "install -y -qq --no-install-recommends prometheus-node-exporter wrk nginx-light chromium "
        "chromium-driver faketime victoria-metrics",
    ]


def test_make_test_and_ci_both_run_it() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "test: tools $(STAMP)" in makefile and "bash .ci/install-tools" in makefile
    assert "\nbash .ci/install-tools\n" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
