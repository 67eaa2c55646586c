"""Bad configurations through the real CLI: exit 2, a line per problem, no secret or traceback.

Through the command line's entry point (exporter.cli:main) in the test's process: a bad
configuration stops it before it sets anything up. The one given by the environment runs the
CLI as its own process.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from exporter.config import ConfigError, load_settings, parse_duration
from tests.conftest import cli_env, run_cli, run_in_process

SECRET = "sk-very-secret-value-123"

GOOD = f"""
poll_interval: 30s
aihc:
  - name: pool-a
    access_key_id: ak-visible-id
    secret_access_key: {SECRET}
    resource_pool_id: cce-1uji3ib5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exporter.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> subprocess.CompletedProcess[str]:
    """exporter.cli:main on `args` in this process: its exit code and what it printed."""
    code = run_in_process(*args)
    printed = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, printed.out, printed.err)


def assert_config_failure(result, *expected: str) -> list[str]:  # type: ignore[no-untyped-def]
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert SECRET not in result.stderr + result.stdout
    for fragment in expected:
        assert any(fragment in line for line in lines), (fragment, lines)
    return lines


def test_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main(capsys, "--config", str(tmp_path / "nope.yaml"))
    lines = assert_config_failure(result, "config: file not found")
    assert len(lines) == 1


def test_invalid_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main(capsys, "--config", str(write(tmp_path, "aihc: [\n  - name: x\n  bad")))
    assert_config_failure(result, "invalid YAML", "line")


def test_unknown_key_wrong_type_bad_duration_duplicate_and_missing_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = f"""
poll_interval: soon
colour: blue
aihc:
  - name: pool-a
    access_key_id: ak
    secret_access_key: {SECRET}
    resource_pool_id: cce-1
    limits: {{max_concurrency: many}}
  - name: pool-b
    access_key_id: ak
    secret_access_key: {SECRET}
"""
    lines = assert_config_failure(
        run_main(capsys, "--config", str(write(tmp_path, text))),
        "poll_interval: not a duration",
        "colour: unknown key",
        "aihc[0].limits.max_concurrency:",
        "aihc[1].resource_pool_id: Field required",
    )
    assert len(lines) == 4


def test_duplicate_names_and_missing_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = f"""
aihc:
  - name: same
    access_key_id: ak
    secret_access_key: {SECRET}
    resource_pool_id: cce-1
alaya:
  - name: same
    jobs: [{{id: j1, pods: [worker-0]}}]
"""
    lines = assert_config_failure(
        run_main(capsys, "--config", str(write(tmp_path, text))),
        "alaya[0].name: duplicate target name",
        "alaya[0].api_key: field required",
    )
    assert len(lines) == 2


def test_secret_from_file_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sk").write_text(SECRET + "\n")
    path = write(
        tmp_path,
        f"""
aihc:
  - name: pool-a
    secret_access_key_file: {tmp_path / "sk"}
    resource_pool_id: cce-1
""",
    )
    monkeypatch.setenv("TJE_AIHC_ACCESS_KEY_ID", "ak-from-env")
    settings = load_settings(path)
    target = settings.aihc[0]
    assert target.secret_access_key is not None
    assert target.secret_access_key.get_secret_value() == SECRET
    assert target.access_key_id is not None
    assert target.access_key_id.get_secret_value() == "ak-from-env"
    assert SECRET not in repr(settings)


def test_unreadable_secret_file_names_the_key(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
alaya:
  - name: a
    api_key_file: /nonexistent/key
    jobs: [{id: j1, pods: [worker-0]}]
""",
    )
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert info.value.problems == [
        "alaya[0].api_key_file: cannot read /nonexistent/key: No such file or directory"
    ]


def test_precedence_flags_over_env_over_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, GOOD + "web: {listen_address: '127.0.0.1:1111', telemetry_path: /m}\n")
    monkeypatch.setenv("TJE_WEB__LISTEN_ADDRESS", "127.0.0.1:2222")
    monkeypatch.setenv("TJE_POLL_INTERVAL", "2m")
    settings = load_settings(path)
    assert settings.web.listen_address == "127.0.0.1:2222"
    assert settings.web.telemetry_path == "/m"
    assert settings.poll_interval == 120
    settings = load_settings(path, {"web": {"listen_address": "127.0.0.1:3333"}})
    assert settings.web.listen_address == "127.0.0.1:3333"
    assert settings.web.telemetry_path == "/m"


def test_no_target_is_valid_only_in_demo(tmp_path: Path) -> None:
    path = write(tmp_path, "poll_interval: 10s\n")
    with pytest.raises(ConfigError, match="no aihc or alaya target"):
        load_settings(path)
    assert load_settings(path, {"demo": True}).demo


def test_bad_flag_value_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main(
        capsys, "--config", str(write(tmp_path, GOOD)), "--web.listen-address", "nowhere"
    )
    assert_config_failure(result, "web.listen_address: must be host:port")


def test_env_override_error_names_the_key(tmp_path: Path) -> None:
    result = run_cli("--config", str(write(tmp_path, GOOD)), env=cli_env(TJE_LOG__LEVEL="loud"))
    assert_config_failure(result, "log.level:")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("5m", 300), ("1h", 3600), ("1h30m", 5400), ("250ms", 0.25), (45, 45), ("7", 7)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5 minutes", "-3", "1y", True])
def test_bad_durations(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)
