"""Hostile local input through the real CLI: exit 2, one line, no traceback, little time and memory.

One test per finding of issue 14 (each measured before the bounds: a 2,999-line RecursionError;
1.5 GiB read from /dev/zero; 23 s and 3.6 GiB for 700,000 queues; 9,096 calls in 5 s at
`poll_interval: 1ms`; `requests_per_second: 0` silently unlimited). The peak RSS is the
exporter's own, measured by a small launcher process.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from exporter.config import load_settings
from tests.conftest import REPO, cli_env

MAX_SECONDS = 20.0
MAX_RSS_MIB = 200

TARGET = """
aihc:
  - name: pool-a
    access_key_id: ak
    secret_access_key: sk
    resource_pool_id: cce-1
"""


@dataclass
class Outcome:
    returncode: int
    stderr: str
    seconds: float
    rss_mib: float

    @property
    def lines(self) -> list[str]:
        return self.stderr.strip().splitlines()


# Runs the exporter and prints its peak RSS in KiB. A child's ru_maxrss counts what it held
# before exec, i.e. a copy of its parent's pages: the parent here is this small launcher, not
# pytest (hundreds of MiB after a few hundred tests).
LAUNCHER = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, timeout=60).returncode
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


def run_measured(*args: str) -> Outcome:
    """The CLI's exit code, stderr, wall time and peak RSS."""
    started = time.monotonic()
    command = [sys.executable, "-m", "exporter", "--web.listen-address", "127.0.0.1:0", *args]
    result = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *command],
        cwd=REPO,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=90,
    )
    seconds = time.monotonic() - started
    return Outcome(result.returncode, result.stderr, seconds, int(result.stdout) / 1024)


def write(tmp_path: Path, text: str, name: str = "exporter.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def assert_one_line_exit_2(outcome: Outcome, expected: str) -> None:
    assert outcome.returncode == 2, outcome.stderr[-2000:]
    assert "Traceback" not in outcome.stderr
    assert len(outcome.lines) == 1, outcome.lines[:5]
    assert expected in outcome.lines[0], outcome.lines
    assert outcome.seconds < MAX_SECONDS, outcome.seconds
    assert outcome.rss_mib < MAX_RSS_MIB, outcome.rss_mib


def test_config_nested_50000_deep(tmp_path: Path) -> None:
    path = write(tmp_path, "a: " + "[" * 50_000 + "]" * 50_000 + "\n")
    # Ours ("nests deeper than 64 levels"), or libyaml's own limit in PyYAML 6.0.4's wheels
    # ("exceeded maximum nesting depth"), whichever is met first.
    assert_one_line_exit_2(run_measured("--config", str(path)), "nest")


def test_web_config_nested_50000_deep(tmp_path: Path) -> None:
    web = write(tmp_path, "basic_auth_users: " + "{a: " * 50_000 + "}" * 50_000, "web.yml")
    outcome = run_measured("--demo", "--web.config.file", str(web))
    assert_one_line_exit_2(outcome, "web.config.file: ")
    assert "nest" in outcome.stderr


@pytest.mark.parametrize("flag", ["--config", "--web.config.file"])
def test_dev_zero_reads_at_most_1_mib(flag: str) -> None:
    args = ("--demo", flag, "/dev/zero") if flag == "--web.config.file" else (flag, "/dev/zero")
    outcome = run_measured(*args)
    assert_one_line_exit_2(outcome, "/dev/zero is larger than 1024 KiB")


def test_billion_laughs(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, 9):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    path = write(tmp_path, "\n".join(lines) + "\n" + TARGET + "    queues: *a8\n")
    assert len(path.read_bytes()) < 1000
    assert_one_line_exit_2(
        run_measured("--config", str(path)), "values once its aliases are expanded"
    )


def test_ten_megabytes_of_queues(tmp_path: Path) -> None:
    # q0000000 to q0699999, one a line: 70 copies of a block of 10,000 lines, each copy with
    # its own first three digits (0.03 CPU-s, where formatting each line takes 0.6).
    block = "".join(f"      - q---{i:04d}\n" for i in range(10_000))
    queues = "".join(block.replace("---", f"{h:03d}") for h in range(70))
    path = write(tmp_path, TARGET + "    queues:\n" + queues)
    assert path.stat().st_size > 10_000_000
    assert_one_line_exit_2(run_measured("--config", str(path)), "is larger than 1024 KiB")


def test_a_list_longer_than_its_bound(tmp_path: Path) -> None:
    # Under the size and node bounds, over the queue bound: refused before any poll.
    queues = ", ".join(f"q{i}" for i in range(5_000))
    path = write(tmp_path, TARGET + f"    queues: [{queues}]\n")
    assert_one_line_exit_2(
        run_measured("--config", str(path)), "aihc[0].queues: List should have at most 1000 items"
    )


def test_poll_interval_below_one_second(tmp_path: Path) -> None:
    path = write(tmp_path, "poll_interval: 1ms\n" + TARGET)
    assert_one_line_exit_2(
        run_measured("--config", str(path)), "poll_interval: must be at least 1s"
    )


def test_target_poll_interval_below_one_second(tmp_path: Path) -> None:
    path = write(tmp_path, TARGET + "    poll_interval: 0.5\n")
    assert_one_line_exit_2(
        run_measured("--config", str(path)), "aihc[0].poll_interval: must be at least 1s"
    )


def test_zero_requests_per_second(tmp_path: Path) -> None:
    path = write(tmp_path, TARGET + "    limits: {requests_per_second: 0}\n")
    assert_one_line_exit_2(
        run_measured("--config", str(path)),
        "aihc[0].limits.requests_per_second: 0 would switch the request budget off: "
        "write `unlimited`",
    )


def test_unlimited_is_the_spelled_out_way_to_switch_the_budget_off(tmp_path: Path) -> None:
    path = write(tmp_path, TARGET + "    limits: {requests_per_second: unlimited}\n")
    assert load_settings(path).aihc[0].limits.requests_per_second == 0


def test_an_integer_of_100000_digits(tmp_path: Path) -> None:
    path = write(tmp_path, "poll_interval: " + "9" * 100_000 + "\n" + TARGET)
    assert_one_line_exit_2(run_measured("--config", str(path)), "invalid YAML in")


def test_duplicate_keys(tmp_path: Path) -> None:
    path = write(tmp_path, "poll_interval: 30s\npoll_interval: 1h\n" + TARGET)
    assert_one_line_exit_2(run_measured("--config", str(path)), "duplicate key 'poll_interval'")


def test_thousands_of_problems_are_listed_as_twenty_and_a_count(tmp_path: Path) -> None:
    jobs = "".join(f"      - {{id: j{i}, pods: []}}\n" for i in range(3000))
    path = write(tmp_path, "alaya:\n  - name: a\n    api_key: k\n    jobs:\n" + jobs)
    outcome = run_measured("--config", str(path))
    assert outcome.returncode == 2 and "Traceback" not in outcome.stderr
    assert len(outcome.lines) == 21, outcome.lines[-3:]
    assert outcome.lines[-1] == "config: 2980 more problems not listed"
