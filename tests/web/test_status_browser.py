"""The status pages as a person sees them: the exporter polling the simulator over HTTP, its
pages opened in a real headless chromium."""

from __future__ import annotations

import re
import statistics
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from selenium.webdriver.common.by import By

from exporter.config import Settings
from exporter.simulator import Simulator, running
from exporter.simulator.aihc import AihcWorld
from tests.target_helpers import aihc_target
from tests.web.conftest import load, serving

if TYPE_CHECKING:  # the driver's module is imported only where a browser starts
    from selenium.webdriver.remote.webdriver import WebDriver

HOSTILE = (
    '<script>document.title="owned";window.owned=1</script>'
    '<img src=x onerror="window.owned=2"><b>x</b>'
)


def cell_of(browser: WebDriver, row_text: str, column: int) -> str:
    row = browser.find_element(By.XPATH, f"//tr[td[contains(., '{row_text}')]]")
    return str(row.find_elements(By.TAG_NAME, "td")[column].text)


def hover_time(browser: WebDriver, column: int) -> datetime:
    """The absolute time a cell of the first target row shows on hover."""
    cell = browser.find_elements(By.XPATH, "//tr[td]")[0].find_elements(By.TAG_NAME, "td")[column]
    title = cell.find_element(By.TAG_NAME, "time").get_attribute("title")
    assert title is not None and title.endswith(" UTC"), title
    return datetime.strptime(title, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC)


async def test_a_target_answered_500_shows_down_its_error_and_since_when(
    browser: WebDriver,
) -> None:
    simulator = Simulator(seed=7)
    simulator.faults.error_rates = {500: 1.0}
    async with running(simulator) as sim:
        target = aihc_target(sim.url, name="broken", limits={"retries": 0})
        async with serving(Settings(aihc=[target], poll_interval=3600)) as served:
            began = datetime.now(UTC).replace(microsecond=0)
            await served.wait_for(lambda t: t["state"] == "down")
            await load(browser, served.url + "/targets/broken/calls")
            browser.find_element(By.LINK_TEXT, "failed").click()
            fragment = browser.current_url.rsplit("#", 1)[-1]
            answered = browser.find_element(By.ID, fragment).text
            await load(browser, served.url + "/")
    state = cell_of(browser, "aihc/broken", 1)
    assert state.startswith("down since ") and state.endswith(" ago"), state
    since = hover_time(browser, 1)
    assert began <= since <= datetime.now(UTC), since
    badge = browser.find_element(By.CSS_SELECTOR, ".state.down")
    # A colour beside the word: red, not the page's black on white.
    assert badge.value_of_css_property("background-color") == "rgba(179, 38, 30, 1)"
    error = cell_of(browser, "aihc/broken", 2)
    assert "simulated" in error and "DescribeJobs" in error and "code 500" in error, error
    assert "1 failed since the last success (never)" in error, error
    assert cell_of(browser, "aihc/broken", 3) == "never"
    # A failed call links to what the provider answered.
    assert fragment == "failure-0"
    assert "DescribeJobs" in answered and "InternalError" in answered and "sim-fault" in answered


async def test_a_retry_after_pause_shows_until_when(browser: WebDriver) -> None:
    simulator = Simulator(seed=7)
    simulator.faults.error_rates = {429: 1.0}
    simulator.faults.retry_after = "600"
    async with running(simulator) as sim:
        target = aihc_target(sim.url, name="limited", limits={"retries": 0})
        async with serving(Settings(aihc=[target], poll_interval=3600)) as served:
            asked = time.time()
            found = await served.wait_for(lambda t: t["state"] == "paused")
            await load(browser, served.url + "/")
    assert asked + 590 < found["paused_until"] < time.time() + 601
    state = cell_of(browser, "aihc/limited", 1)
    assert state.startswith("paused since ") and "\nuntil in 10 min" in state, state
    until = browser.find_elements(By.XPATH, "//tr[td]")[0].find_elements(By.TAG_NAME, "time")[1]
    shown = datetime.strptime(str(until.get_attribute("title")), "%Y-%m-%d %H:%M:%S UTC")
    assert abs(shown.replace(tzinfo=UTC).timestamp() - found["paused_until"]) < 1
    assert "code 429" in cell_of(browser, "aihc/limited", 2)


async def test_a_job_named_with_html_and_script_shows_as_text_and_runs_nothing(
    browser: WebDriver,
) -> None:
    world = AihcWorld.fixed(jobs=0)
    job = world.add_job(name=HOSTILE, pods=1, status="Pending")
    async with running(Simulator(seed=7, aihc=world)) as sim:
        target = aihc_target(sim.url, name="pool")
        async with serving(Settings(aihc=[target], poll_interval=3600)) as served:
            await served.wait_for(lambda t: t["jobs"] == 1)
            await load(browser, served.url + "/targets/pool/jobs")
            title = browser.title
            owned = browser.execute_script("return window.owned === undefined ? null : 1")
    assert cell_of(browser, job.job_id, 1) == HOSTILE
    assert title == "Jobs of aihc/pool"
    assert owned is None
    assert browser.find_elements(By.CSS_SELECTOR, "td b, td img, td script") == []


async def test_the_jobs_page_of_5000_jobs_answers_in_under_a_second(browser: WebDriver) -> None:
    world = AihcWorld.fixed(jobs=5000, pods_per_job=1, status="Pending")
    async with running(Simulator(seed=7, aihc=world)) as sim:
        target = aihc_target(sim.url, name="big", page_size=1000, events=False)
        async with serving(Settings(aihc=[target], poll_interval=3600)) as served:
            await served.wait_for(lambda t: t["jobs"] == 5000, timeout=60)
            # The first load warms the browser's and the server's first-use paths.
            times = [await load(browser, served.url + "/targets/big/jobs") for _ in range(4)]
            summary = browser.find_element(By.XPATH, "//p[contains(., 'jobs,')]").text
            rows = browser.find_elements(By.XPATH, "//tr[td]")
    assert summary.startswith("5000 jobs, 0 failing"), summary
    assert "showing 1-100" in summary and "next 100" in summary
    assert len(rows) == 100
    print(f"jobs page of 5000 jobs in the browser: {[round(t, 3) for t in times]} s")
    assert statistics.median(times[1:]) < 1.0


async def test_during_an_outage_the_jobs_page_still_names_each_job_and_says_how_old(
    browser: WebDriver,
) -> None:
    world = AihcWorld.fixed(jobs=3, pods_per_job=2)
    simulator = Simulator(seed=7, aihc=world)
    async with running(simulator) as sim:
        target = aihc_target(
            sim.url,
            name="pool",
            limits={"retries": 0, "requests_per_second": "unlimited"},
            events=False,
            metric_types=["GpuUsage"],
            # Every item on the fast tier: each series goes 2 s after its reads stop.
            tiers={"move": {"GpuUsage": "fast", "pods": "fast"}},
        )
        settings = Settings(aihc=[target], poll_interval=1, stale_after=2)
        async with serving(settings) as served:
            await served.wait_for(lambda t: t["jobs"] == 3 and t["state"] == "up")
            simulator.faults.error_rates = {500: 1.0}
            # Every series went stale: the snapshot holds no job any more.
            await served.wait_for(lambda t: t["state"] == "down" and t["jobs"] == 0)
            await load(browser, served.url + "/targets/pool/jobs")
    summary = browser.find_element(By.XPATH, "//p[contains(., 'jobs,')]").text
    assert summary.startswith("3 jobs, 3 failing, 3 stale"), summary
    for job in world.jobs.values():
        assert cell_of(browser, job.job_id, 1) == job.name
        assert cell_of(browser, job.job_id, 2) == "Running"
        assert cell_of(browser, job.job_id, 3) == "2"
        known = cell_of(browser, job.job_id, 4)
        assert re.fullmatch(r"\d+ s ago series stale, gone", known), known
