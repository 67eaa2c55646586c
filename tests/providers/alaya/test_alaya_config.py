"""The Alaya target's configuration: window, time zone, key from a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.config import ConfigError, load_settings
from exporter.providers.alaya import AlayaTarget
from exporter.providers.alaya.client import window_for
from tests.conftest import run_in_process

from .alaya_helpers import T0

KEY = "sk-alaya-config-test-5a1d"


def write(tmp_path: Path, alaya: str) -> Path:
    path = tmp_path / "exporter.yaml"
    path.write_text(
        "alaya:\n  - name: main\n    jobs: [{id: job-1, pods: [worker-0]}]\n" + alaya,
        encoding="utf-8",
    )
    return path


def load_target(tmp_path: Path, alaya: str) -> AlayaTarget:
    return load_settings(write(tmp_path, alaya)).alaya[0]


def problems(tmp_path: Path, alaya: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(write(tmp_path, alaya))
    return caught.value.problems


def test_lookback_replaces_the_period(tmp_path: Path) -> None:
    target = load_target(tmp_path, f"    api_key: {KEY}\n    lookback: 30m\n")
    assert target.period is None and target.lookback == 1800
    window = window_for(target, T0)
    assert window.query() == {"startTime": "2025-09-10 17:43:20", "endTime": "2025-09-10 18:13:20"}


def test_period_is_the_default_window(tmp_path: Path) -> None:
    target = load_target(tmp_path, f"    api_key: {KEY}\n")
    assert window_for(target, T0).query() == {"period": "15m"}
    assert window_for(target, T0).seconds == 900


def test_key_from_a_file(tmp_path: Path) -> None:
    key_file = tmp_path / "alaya.key"
    key_file.write_text(KEY + "\n", encoding="utf-8")
    target = load_target(tmp_path, f"    api_key_file: {key_file}\n")
    assert target.api_key is not None and target.api_key.get_secret_value() == KEY


@pytest.mark.parametrize(
    "alaya, expected",
    [
        ("    time_zone: Mars/Olympus\n", "alaya[0].time_zone: unknown time zone"),
        ("    period: null\n", "alaya[0]: set period (15m, 1h, 6h, 24h, 3d, 7d, 30d) or lookback"),
        ("    period: 2h\n", "alaya[0].period: Input should be '15m'"),
        ("    types: [gpu, disk]\n", "alaya[0].types[1]: Input should be 'gpu'"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, alaya: str, expected: str) -> None:
    found = problems(tmp_path, f"    api_key: {KEY}\n" + alaya)
    assert len(found) == 1 and found[0].startswith(expected), found
    assert KEY not in found[0]


def test_types_are_polled_once_each(tmp_path: Path) -> None:
    target = load_target(tmp_path, f"    api_key: {KEY}\n    types: [gpu, cpu, gpu]\n")
    assert target.types == ["gpu", "cpu"]


def test_cli_rejects_a_bad_time_zone_without_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the command line's entry point (exporter.cli:main), in this process."""
    path = write(tmp_path, f"    api_key: {KEY}\n    time_zone: Nowhere/Else\n")
    code = run_in_process("--config", str(path))
    done = capsys.readouterr()
    assert code == 2
    assert done.err.strip().splitlines() == [
        "alaya[0].time_zone: unknown time zone: use an IANA name like Asia/Shanghai"
    ]
    assert KEY not in done.out + done.err


# --- job sources ----------------------------------------------------------------------------


def test_list_discovery_needs_the_access_key_pair(tmp_path: Path) -> None:
    found = problems(tmp_path, f"    api_key: {KEY}\n    discovery: list\n")
    assert found == [
        "alaya[0].access_key_id: field required (or access_key_id_file, or "
        "TJE_ALAYA_ACCESS_KEY_ID)",
        "alaya[0].secret_access_key: field required (or secret_access_key_file, or "
        "TJE_ALAYA_SECRET_ACCESS_KEY)",
    ]
    # The configured list needs only the API key.
    target = load_target(tmp_path, f"    api_key: {KEY}\n")
    assert target.discovery == "configured" and target.access_key_id is None


def test_the_key_pair_from_files_and_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sk_file = tmp_path / "alaya.sk"
    sk_file.write_text("sk-from-file\n", encoding="utf-8")
    monkeypatch.setenv("TJE_ALAYA_ACCESS_KEY_ID", "ak-from-env")
    target = load_target(
        tmp_path,
        f"    api_key: {KEY}\n    discovery: list\n    secret_access_key_file: {sk_file}\n"
        "    aidc_id: 7\n    pod_pattern: '{name}-worker-{index}'\n",
    )
    assert target.access_key_id is not None and target.secret_access_key is not None
    assert target.access_key_id.get_secret_value() == "ak-from-env"
    assert target.secret_access_key.get_secret_value() == "sk-from-file"
    assert target.aidc_id == "7" and target.list_statuses == ["Running"]


@pytest.mark.parametrize(
    "alaya, expected",
    [
        ("    pod_pattern: '{job}-{index}'\n", "alaya[0].pod_pattern: placeholders are {name}"),
        ("    pod_pattern: '{name}-worker'\n", "alaya[0].pod_pattern: needs {index}"),
        ("    pod_pattern: 'w-{index'\n", "alaya[0].pod_pattern: unbalanced { or }"),
        ("    pod_pattern: 'w-{index:>99999}'\n", "alaya[0].pod_pattern: placeholders are"),
        ("    discovery: api\n", "alaya[0].discovery: Input should be 'configured' or 'list'"),
        ("    list_page_size: 0\n", "alaya[0].list_page_size: Input should be greater than"),
        ("    jobs_file: [a]\n", "alaya[0].jobs_file: Input is not a valid path"),
    ],
)
def test_bad_source_keys_name_the_key(tmp_path: Path, alaya: str, expected: str) -> None:
    found = problems(tmp_path, f"    api_key: {KEY}\n" + alaya)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_cli_refuses_list_discovery_without_keys_in_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Through the command line's entry point (exporter.cli:main), in this process."""
    path = write(tmp_path, f"    api_key: {KEY}\n    discovery: list\n")
    code = run_in_process("--config", str(path))
    done = capsys.readouterr()
    assert code == 2
    lines = done.err.strip().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "alaya[0].access_key_id",
        "alaya[0].secret_access_key",
    ]
    assert KEY not in done.out + done.err and "Traceback" not in done.err
