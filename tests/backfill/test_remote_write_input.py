"""Bad remote-write flags, and a store nobody answers: one line on stderr, exit code 2, before
any call to a provider, and no state left behind.

The flags are checked through the command line's entry point (exporter.cli:main) in the test's
process: they stop before the run registers secrets or sets up logging. The store nobody
answers is found by a call, once the run is set up: its own process.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backfill.backfill_helpers import assert_refused
from tests.conftest import run_cli, run_in_process

URL = "http://127.0.0.1:9/api/v1/write"
BAD_FLAGS = [
    (["--remote-write.window", "1h"], "--remote-write.* options need --remote-write URL"),
    (["--remote-write", "ftp://h/api/v1/write"], "want an http:// or https:// URL"),
    (["--remote-write", "http://u:pw@h/api/v1/write"], "no credentials in the URL"),
    (
        ["--remote-write", URL, "--remote-write.username", "u"],
        "--remote-write.username needs --remote-write.password-file",
    ),
    (
        ["--remote-write", URL, "--remote-write.bearer-token-file", "nope"],
        "--remote-write.bearer-token-file nope: FileNotFoundError",
    ),
    (
        ["--remote-write", URL, "--remote-write.header", "Authorization=Bearer x"],
        "--remote-write.header Authorization: set by the backfill itself",
    ),
    (["--remote-write", URL, "--remote-write.window", "soon"], "a duration or unlimited"),
]
# Nothing listens there: the probe finds out before anything is read.
NOBODY_ANSWERS = (
    ["--remote-write", URL],
    "--remote-write: GET http://127.0.0.1:9/api/v1/status/buildinfo",
)


def backfill_args(config: Path, args: list[str]) -> list[str]:
    return ["backfill", "--config", str(config), "--output", "h.om", "--since", "1d", *args]


@pytest.mark.parametrize("args, says", BAD_FLAGS)
def test_bad_remote_write_input_is_one_line_and_exit_2(
    config: Path,
    tmp_path: Path,
    args: list[str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = run_in_process(*backfill_args(config, args))
    assert_refused(code, capsys.readouterr().err, says, tmp_path)


@pytest.mark.parametrize("args, says", [NOBODY_ANSWERS])
def test_a_store_nobody_answers_in_its_own_process_is_one_line_and_exit_2(
    config: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    run = run_cli(*backfill_args(config, args), cwd=tmp_path)
    assert_refused(run.returncode, run.stderr, says, tmp_path)
