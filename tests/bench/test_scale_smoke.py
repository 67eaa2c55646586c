"""bench/scale.py runs end to end, small, and prints every figure line with its goal; no figure
asserted (they are the benchmark's to print, at 1,000 jobs on a quiet machine)."""

from __future__ import annotations

import re

import pytest

from tests.bench.running import NUMBER, run

GOAL = r"\(goal <= [\d.]+: (met|MISSED)\)"


@pytest.mark.slow
def test_scale_prints_every_figure_beside_its_goal() -> None:
    small = ("--jobs", "8", "--scale", "10", "--steady", "4", "--idle", "2", "--floor", "2")
    rounds = ("--rounds", "2", "--window", "1", "--settle", "0")
    out = run("bench.scale", *small, *rounds, "--identity-every", "1", timeout=120)
    name = r"jobs=8 pods=8 scale=10 series=[1-9]\d+"
    for pattern in (
        rf"^scale +{name} first_reads_s={NUMBER} floor_s={NUMBER} units=8/8 ratio={NUMBER} {GOAL}",
        rf"^scale +{name} steady_s={NUMBER} oldest_gpu_read_s={NUMBER} .* ratio={NUMBER} {GOAL}",
        rf"^scrape +{name} encoding=gzip while_polling scrapes=[1-9]\d* .* p99_ms={NUMBER} {GOAL}",
        rf"^scrape +{name} encoding=identity while_polling scrapes=[1-9]\d* p50_ms={NUMBER}",
        rf"^cpu +{name} rounds=2 provider_requests=[1-9]\d* rps={NUMBER} of_budget={NUMBER} "
        rf"cpu_ms_per_request={NUMBER} ",
        rf"^cpu +{name} .* loop_thread_ms_per_request={NUMBER} "
        rf"other_threads_ms_per_request={NUMBER} loop_blocks_per_request={NUMBER} ",
        rf"^floor +{name} bare_aiohttp_cpu_ms_per_request={NUMBER} .*floor=-?{NUMBER} {GOAL} "
        rf"ours_whole/floor={NUMBER} each_round=-?{NUMBER}/-?{NUMBER} "
        rf"floor_blocks_per_request={NUMBER} "
        r"dropped_each_round=\d+/\d+ overruns_each_round=\d+/\d+$",
        rf"^rss +{name} after_first_render_MiB={NUMBER} peak_MiB={NUMBER} settled_MiB={NUMBER} "
        rf".* failed_scrapes=0$",
    ):
        assert re.search(pattern, out, re.M), (pattern, out)
