"""bench/churn.py and bench/polling.py run end to end, small, and print every figure line;
no timing asserted (the goals are the benchmarks' to print, on a quiet machine). wrk is paced
(`--pace-ms`: a few requests a second per connection), as no figure is read here; churn's
2,000 series are 5 synthetic jobs, 4 of them given new values a second, a part of the pool
as at full size."""

from __future__ import annotations

import itertools
import re
import shutil

import pytest

from tests.bench.running import NUMBER, run


@pytest.mark.skipif(
    not (shutil.which("/usr/bin/wrk") and shutil.which("nginx")), reason="needs wrk and nginx"
)
@pytest.mark.slow
def test_churn_prints_both_servers_and_ratios() -> None:
    flags = ("--series", "2000", "--duration", "1", "--repeat", "1", "--pace-ms", "200")
    out = run("bench.churn", *flags, "--encodings", "gzip,identity", timeout=240)
    for encoding, connections in itertools.product(("gzip", "identity"), (1, 32)):
        shown = f"encoding={encoding} connections={connections}"
        for server in ("ours", "nginx"):
            assert re.search(
                rf"^churn +series=\d+ jobs_per_s=4 {shown} server={server} "
                rf"p50_ms={NUMBER} p99_ms={NUMBER} req_per_s={NUMBER} errors=0 ",
                out,
                re.M,
            ), out
        assert re.search(rf"^ratio +series=\d+ {shown} ours/nginx p50={NUMBER} ", out, re.M), out
        # What ours' loop waited for in its one repeat, and its collections.
        assert re.search(
            rf"^pauses +series=\d+ {shown} repeat=0 lags_not_running=\d+ .*lags_loop=\d+ "
            r".*lags_thread=\d+ .*collections\(gen0/1/2\)=\d+/\d+/\d+ ",
            out,
            re.M,
        ), out


@pytest.mark.slow
def test_polling_prints_busy_idle_and_cpu_per_request() -> None:
    # The second case, 10 requests a second: still some in the 1 s busy phase.
    phases = ("--warmup", "1", "--busy", "1", "--idle", "1", "--floor", "1")
    out = run("bench.polling", *phases, "--rate", "10", timeout=120)
    assert re.search(rf"^polling busy lines=\d+ scrapes=\d+ p50_ms={NUMBER} p99_ms=", out, re.M)
    assert re.search(rf"^polling idle lines=\d+ scrapes=\d+ p50_ms={NUMBER} p99_ms=", out, re.M)
    assert re.search(rf"^ratio +busy/idle scrape_p99={NUMBER} ", out, re.M), out
    assert re.search(
        rf"^cpu +exporter_cpu_s={NUMBER} provider_requests=[1-9]\d* cpu_ms_per_request={NUMBER}",
        out,
        re.M,
    ), out
    assert re.search(
        rf"^floor +bare_aiohttp_cpu_ms_per_request={NUMBER} at {NUMBER}/s .* ours/floor={NUMBER} ",
        out,
        re.M,
    ), out
    assert re.search(
        rf"^scrapes idle_cpu_ms_per_s={NUMBER} cpu_ms_per_request_without_scrapes=-?{NUMBER} ",
        out,
        re.M,
    ), out
