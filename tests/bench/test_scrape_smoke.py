"""bench/scrape.py --smoke runs end to end and prints every figure line, each sane; no timing
asserted (the figures are the benchmark's to print, full size, on a quiet machine)."""

from __future__ import annotations

import re
import shutil

import pytest

from tests.bench.running import NUMBER, run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (shutil.which("/usr/bin/wrk") and shutil.which("/usr/bin/prometheus-node-exporter")),
        reason="needs wrk and prometheus-node-exporter (Debian)",
    ),
]


def test_quick_benchmark_prints_every_figure() -> None:
    out = run("bench.scrape", "--smoke", timeout=120)
    series = r"series=[1-9]\d{3,}"
    assert re.search(
        rf"^cpu +{series} build_us_per_series={NUMBER} "
        rf"render_us_per_series={NUMBER} total_us_per_series={NUMBER}",
        out,
        re.M,
    )
    assert re.search(rf"^rss +{series} after_render_MiB={NUMBER}", out, re.M)
    assert re.search(rf"^rss +{series} after_render_with_openmetrics_MiB={NUMBER}", out, re.M)
    assert re.search(
        rf"^rss +{series} after_1_more_polls_MiB={NUMBER} settled_MiB={NUMBER}", out, re.M
    )
    assert re.search(rf"^rss +{series} peak_under_load_MiB={NUMBER}", out, re.M)
    assert re.search(
        rf"^cpu +{series} scrape_cpu_ms identity={NUMBER} gzip={NUMBER} ", out, re.M
    ), out
    for encoding in ("identity", "gzip"):
        for server in ("ours", "node_exporter"):
            assert re.search(
                rf"^scrape +{series} encoding={encoding} server={server} p50_ms={NUMBER} "
                rf"p99_ms={NUMBER} req_per_s={NUMBER} errors=0 ",
                out,
                re.M,
            ), out
        assert re.search(
            rf"^ratio +{series} encoding={encoding} ours/node_exporter p50={NUMBER} "
            rf"p99={NUMBER} req_per_s={NUMBER}$",
            out,
            re.M,
        ), out
