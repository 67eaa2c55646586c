"""The soak's tasks that run beside its chaos, and the calls to the processes they share with it.

`Tasks` holds the soak's clock, its record and its two processes. Its tasks: the two scrapers
(gzip and identity), the sampler (the processes' RSS and CPU, both clocks, what a scrape
exports), the jobs file's turns, each target's stale bound and the hourly progress line. Its
calls, which the chaos makes too: the simulator's control API and the exporter's pages. `Soak`
(bench/soak/run.py) is these tasks with the driver over them.

Everything here runs on the real clock (CLOCK_BOOTTIME) and waits for simulated moments
through the shared clock's mapping.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.soak.clock import SharedClock, boottime
from bench.soak.expect import FILE_AIDC, Expected
from bench.soak.procs import SECRETS, Exporter, Simulator, cpu_seconds, rss_kib
from bench.soak.record import Record, Sample, Scrape
from bench.soak.schedule import AIHC

SCRAPE = 30.0
SAMPLE = 60.0
# The jobs file turns over this often: a job in it stays, the others take turns.
ROTATE = 600.0


class Tasks:
    def __init__(self, run: float, speed: float, seed: int, workdir: Path):
        self.clock = SharedClock(speed, workdir)
        self.seed = seed
        self.workdir = workdir
        self.record = Record(run, speed)
        self.expected = Expected(seed)
        self.simulator = Simulator(self.clock, seed)
        self.exporter: Exporter | None = None
        self.session: aiohttp.ClientSession | None = None

    # -- time ------------------------------------------------------------------------------

    def now(self) -> float:
        """Simulated seconds since the exporter's first start."""
        return self.clock.sim() - self.record.t0

    async def until(self, at: float) -> None:
        """Sleep until the simulated moment `at` (seconds since the start)."""
        wait = self.clock.boot_at(self.record.t0 + at) - boottime()
        if wait > 0:
            await asyncio.sleep(wait)

    async def progress(self, say: Callable[[str], None]) -> None:
        began, hour = time.monotonic(), 0
        while True:
            hour += 1
            await self.until(hour * 3600.0)
            last = self.record.samples[-1] if self.record.samples else None
            rss = f"; exporter RSS {last.exporter_rss} KiB" if last and last.exporter_rss else ""
            say(f"  {hour} h simulated in {time.monotonic() - began:.0f} s{rss}")

    # -- the simulator and the exporter ------------------------------------------------------

    async def control(self, path: str, data: dict[str, Any] | None = None) -> Any:
        assert self.session is not None
        url = self.simulator.control + path
        if data is None:
            async with self.session.get(url) as reply:
                return await reply.json()
        async with self.session.post(url, json=data) as reply:
            return await reply.json()

    async def credentials(self, keys: dict[str, Any]) -> None:
        await self.control("/credentials", keys)

    async def bounds(self) -> None:
        """Each target's longest stale bound, as its status page gives it, once it has one."""
        for _ in range(600):
            doc = await self.page_json("/status.json")
            if doc is not None and all(t["tiers"] for t in doc["targets"]):
                for target in doc["targets"]:
                    self.record.bounds[target["target"]] = max(x["bound"] for x in target["tiers"])
                return
            await asyncio.sleep(0.05)

    async def page_json(self, path: str) -> Any:
        text, _ = await self.get(path)
        return None if text is None else json.loads(text)

    async def get(self, path: str, **headers: str) -> tuple[str | None, float | None]:
        """The body of `path` on the exporter and its Date (None when it is down)."""
        assert self.session is not None and self.exporter is not None
        try:
            async with self.session.get(self.exporter.url + path, headers=headers) as reply:
                text = await reply.text()
                date = email.utils.parsedate_to_datetime(reply.headers["Date"]).timestamp()
                return (text if reply.status == 200 else None), date
        except (aiohttp.ClientError, OSError, KeyError):
            return None, None

    # -- scrapes and samples -----------------------------------------------------------------

    async def scraper(self, gzip: bool) -> None:
        assert self.session is not None and self.exporter is not None
        encoding = "gzip" if gzip else "identity"
        n = 0
        while True:
            n += 1
            await self.until(n * SCRAPE + (SCRAPE / 2 if gzip else 0.0))
            began, at = time.perf_counter(), self.now()
            try:
                async with self.session.get(
                    self.exporter.url + "/metrics", headers={"Accept-Encoding": encoding}
                ) as reply:
                    text = await reply.text()
                    ok = reply.status == 200
            except (aiohttp.ClientError, OSError):
                text, ok = "", False
            took = time.perf_counter() - began
            floor = await self._healthy() if not gzip else None
            self.record.scrapes.append(Scrape(at, gzip, took, ok, _ups(text) if ok else {}, floor))

    async def _healthy(self) -> float | None:
        """Seconds a `/-/healthy` takes right after a scrape: the floor the scrape is held to
        (the machine's load, the soak's own loop), measured in the same moment."""
        assert self.session is not None and self.exporter is not None
        began = time.perf_counter()
        try:
            async with self.session.get(self.exporter.url + "/-/healthy") as reply:
                await reply.read()
        except (aiohttp.ClientError, OSError):
            return None
        return time.perf_counter() - began

    async def sampler(self) -> None:
        n = 0
        while True:
            n += 1
            await self.until(n * SAMPLE)
            await self.sample(collect=n % 10 == 0)

    async def sample(self, collect: bool) -> None:
        assert self.exporter is not None
        at = self.now()
        sample = Sample(at, self.exporter.generation if self.exporter.pid else 0)
        pid = self.exporter.pid
        if pid is not None:
            sample.exporter_rss, sample.exporter_cpu = rss_kib(pid), cpu_seconds(pid)
        stats = await self.control("/stats" + ("?collect=1" if collect else ""))
        # Its clock between two reads of /proc/uptime (10 ms steps): the expected time then.
        earliest = self.clock.sim(stats["uptime"])
        sample.sim_clock = _outside(
            stats["time"], earliest, self.clock.sim(stats["uptime_after"] + 0.01), 0.0
        )
        sample.sim_rss, sample.collected = stats["rss_kib"], collect
        sample.sim_cpu = cpu(self.simulator.process)
        before = boottime()
        text, date = await self.get("/metrics")
        if date is not None:
            sample.exporter_clock = _outside(date, self.clock.sim(before), self.clock.sim())
        if text is not None:
            _read_exposition(text, sample)
            sample.secrets = [s for s in SECRETS if s in text]
        self.record.samples.append(sample)

    # -- the jobs file -----------------------------------------------------------------------

    async def jobs_file(self) -> None:
        turn = 0
        while True:
            turn += 1
            await self.until(turn * ROTATE)
            self.write_jobs_file(turn * ROTATE)

    def write_jobs_file(self, at: float) -> None:
        """The running jobs of the file's data centre, all but one in turn."""
        assert self.exporter is not None
        running = self.expected.alaya_running(self.record.t0 + at, FILE_AIDC)
        ids = sorted(running)
        turn = int(at // ROTATE)
        if len(ids) > 1:
            ids.remove(ids[turn % len(ids)])
        jobs = {i: running[i] for i in ids}
        document = {"jobs": [{"id": i, "pods": sorted(p)} for i, p in jobs.items()]}
        temporary = self.exporter.jobs_file.with_suffix(".tmp")
        temporary.write_text(yaml.safe_dump(document))
        temporary.replace(self.exporter.jobs_file)
        self.expected.wrote(self.record.t0 + at, jobs)


def cpu(process: Any) -> float:
    return (cpu_seconds(process.pid) or 0.0) if process is not None else 0.0


def _outside(date: float, earliest: float, latest: float, rounding: float = 1.0) -> float:
    """How far a time lies outside the simulated span it was read in: 0 when inside; a Date
    header, whole seconds rounded down, may read up to `rounding` early."""
    if date > latest:
        return date - latest
    if date < earliest - rounding:
        return date - (earliest - rounding)
    return 0.0


def _ups(text: str) -> dict[str, float]:
    """`training_exporter_up` per target, from a scrape's lines."""
    found = {}
    for line in text.splitlines():
        if line.startswith("training_exporter_up{"):
            target = line.split('target="', 1)[1].split('"', 1)[0]
            found[target] = float(line.rsplit(" ", 1)[1])
    return found


_LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def _read_exposition(text: str, sample: Sample) -> None:
    """What a sample needs from a scrape, by its lines (the prometheus_client parser takes
    long enough to hold up the taps on this loop)."""
    sample.pods = {AIHC: set(), "alaya": set()}
    for line in text.splitlines():
        if not line.startswith("training_"):
            continue
        if "{" in line:
            name, rest = line.split("{", 1)
            labels, value = rest.rsplit("}", 1)
        else:
            name, labels, value = *line.split(" ", 1)[:1], "", line.rsplit(" ", 1)[1]
        if name == "training_exporter_up":
            sample.up[_labels(labels)["target"]] = float(value)
        elif name == "training_exporter_config_last_reload_successful":
            sample.reload_ok = float(value)
        elif name == "training_exporter_api_requests_total" and (
            'code="401"' in labels or 'code="403"' in labels
        ):
            sample.refused += float(value)
        elif 'job_id="' in labels:
            _read_job_line(name, _labels(labels), sample)


def _read_job_line(name: str, labels: dict[str, str], sample: Sample) -> None:
    provider = labels.get("provider")
    if name == "training_job_info" and provider == "aihc":
        sample.aihc_jobs.add(labels["job_id"])
    elif "pod" in labels and provider in ("aihc", "alaya"):
        key = AIHC if provider == "aihc" else "alaya"
        sample.pods[key].add((labels["job_id"], labels["pod"]))


def _labels(text: str) -> dict[str, str]:
    return {k: v.replace('\\"', '"').replace("\\\\", "\\") for k, v in _LABEL.findall(text)}
