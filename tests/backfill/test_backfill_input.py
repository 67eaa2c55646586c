"""Bad input: one line on stderr, exit code 2, no traceback, and no call made.

The checks that need no call run through the command line's entry point (exporter.cli:main,
the training-job-exporter script) in the test's process: they stop before the run registers
secrets or sets up logging. The rest, and one of those, run as their own process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.backfill.backfill_helpers import assert_refused
from tests.conftest import run_cli, run_in_process

BAD_INPUT = [
    (
        ["--target", "nope", "--since", "1d"],
        "--target 'nope': no such target (targets: pool-a, alaya-a)",
    ),
    (["--since", "1d", "--until", "2099-01-01T00:00:00Z"], "is in the future"),
    (["--since", "2099-01-01"], "is in the future"),
    (["--since", "2h", "--until", "3h"], "must be before --until"),
    (["--since", "yesterday"], "--since 'yesterday': not a duration"),
    (["--since", "1d", "--requests-per-second", "-1"], "--requests-per-second must be above 0"),
    (["--since"], "--since: expected one argument"),
]
# Known to a provider's history reader, once the run is set up: its own process.
PAST_RETENTION = (["--since", "40d"], "alaya target alaya-a keeps 30 days of history")


@pytest.mark.parametrize("args, says", BAD_INPUT)
def test_bad_input_is_one_line_and_exit_2(
    config: Path,
    tmp_path: Path,
    args: list[str],
    says: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code = run_in_process("backfill", "--config", str(config), "--output", "h.om", *args)
    assert_refused(code, capsys.readouterr().err, says, tmp_path)


@pytest.mark.parametrize("args, says", [PAST_RETENTION])
def test_bad_input_in_its_own_process_is_one_line_and_exit_2(
    config: Path, tmp_path: Path, args: list[str], says: str
) -> None:
    run = run_cli("backfill", "--config", str(config), "--output", "h.om", *args, cwd=tmp_path)
    assert_refused(run.returncode, run.stderr, says, tmp_path)


def test_aihc_alone_may_go_back_further_than_alaya_keeps(config: Path, tmp_path: Path) -> None:
    """AIHC documents no limit; the Alaya target is not asked (and not read)."""
    run = run_cli(
        "backfill",
        "--config",
        str(config),
        "--target",
        "pool-a",
        "--since",
        "40d",
        "--output",
        "h.om",
        cwd=tmp_path,
    )
    # The AIHC endpoint is unreachable: the list fails, reported on one line, exit 1.
    assert run.returncode == 1, run.stderr
    assert "aihc target pool-a: jobs not listed" in run.stderr
    assert "Traceback" not in run.stderr


def test_another_runs_state_is_one_line(config: Path, tmp_path: Path) -> None:
    state = tmp_path / "h.om.state"
    state.mkdir()
    (state / "run.json").write_text(json.dumps({"params": {"since": "3d"}}))
    run = run_cli(
        "backfill", "--config", str(config), "--since", "1d", "--output", "h.om", cwd=tmp_path
    )
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert "holds another backfill's state" in lines[0]


def test_a_configuration_problem_is_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"aihc": [{"name": "x"}]}))
    monkeypatch.chdir(tmp_path)
    code = run_in_process("backfill", "--config", str(bad), "--since", "1d", "--output", "h.om")
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert all(line.startswith("aihc[0].") for line in stderr.strip().splitlines())
