"""Bad remote-write flags, and a store nobody answers: one line on stderr, exit code 2, before
any call to a provider, and no state left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli

URL = "http://127.0.0.1:9/api/v1/write"


@pytest.mark.parametrize(
    "args, says",
    [
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
        # Nothing listens there: the probe finds out before anything is read.
        (["--remote-write", URL], "--remote-write: GET http://127.0.0.1:9/api/v1/status/buildinfo"),
    ],
)
def test_bad_remote_write_input_is_one_line_and_exit_2(
    config: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    run = run_cli(
        "backfill",
        "--config",
        str(config),
        "--output",
        "h.om",
        "--since",
        "1d",
        *args,
        cwd=tmp_path,
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and says in lines[0], run.stderr
    assert not (tmp_path / "h.om").exists() and not (tmp_path / "h.om.state").exists()
