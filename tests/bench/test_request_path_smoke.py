"""bench/request_path.py runs end to end, small, and prints its figure line; no figure
asserted (they are the benchmark's to print, on a quiet machine)."""

from __future__ import annotations

import re

import pytest

from tests.bench.running import NUMBER, run


@pytest.mark.slow
def test_request_path_prints_both_sides_per_round_and_their_ratio() -> None:
    small = ("--jobs", "10", "--requests", "40", "--rounds", "2", "--rate", "400")
    out = run("bench.request_path", *small, timeout=120)
    rounds = rf"{NUMBER}/{NUMBER}"
    assert re.search(
        rf"^path +jobs=10 requests=40 rounds=2 rate=400 ours_cpu_ms_per_request={rounds} "
        rf"bare_aiohttp_cpu_ms_per_request={rounds} ours/bare={NUMBER} above_bare_ms=-?{NUMBER}$",
        out,
        re.M,
    ), out
