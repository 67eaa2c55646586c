"""The soak's run: the processes, the taps, the scrapers, the chaos and the samples.

Everything here runs on the real clock (CLOCK_BOOTTIME) and waits for simulated moments
through the shared clock's mapping; what it records is in simulated seconds since the
exporter's first start (`Record.t0`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import re
import signal
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench.soak.clock import SharedClock, boottime
from bench.soak.expect import FILE_AIDC, Expected
from bench.soak.procs import (
    KEYS,
    ROUND,
    SECRETS,
    TIMEOUT,
    Exporter,
    Simulator,
    cpu_seconds,
    rss_kib,
)
from bench.soak.schedule import AIHC, TARGETS, Episode
from bench.soak.taps import TapThread
from exporter.providers.aihc.signer import Credentials, canonical_time, sign
from exporter.simulator.aihc import DEMO_RESOURCE_POOL
from exporter.simulator.tap import Tap

SCRAPE = 30.0
SAMPLE = 60.0
# The jobs file turns over this often: a job in it stays, the others take turns.
ROTATE = 600.0
PAGES = ("/", "/status.json")
# The wall-clock step: half a timeout, so calls under way as it comes do not time out (libfaketime
# moves the monotonic clock with it).
STEP = 30.0
TARGET_PAGES = ("/jobs", "/jobs.json", "/calls", "/calls.json")


@dataclass
class Sample:
    at: float
    generation: int
    exporter_rss: int | None = None
    exporter_cpu: float | None = None
    sim_rss: int | None = None
    sim_cpu: float | None = None
    collected: bool = False
    up: dict[str, float] = field(default_factory=dict)
    aihc_jobs: set[str] = field(default_factory=set)
    pods: dict[str, set[tuple[str, str]]] = field(default_factory=dict)
    reload_ok: float | None = None
    refused: float = 0.0
    exporter_clock: float | None = None
    sim_clock: float | None = None
    secrets: list[str] = field(default_factory=list)


@dataclass
class Scrape:
    at: float
    gzip: bool
    seconds: float
    ok: bool
    up: dict[str, float] = field(default_factory=dict)
    # A `/-/healthy` right after it (identity scrapes only).
    floor: float | None = None


@dataclass
class Visit:
    """The status pages as fetched during an episode."""

    episode: Episode
    at: float
    targets: dict[str, dict[str, Any]]
    secrets: list[str]


@dataclass
class Record:
    run: float
    speed: float
    t0: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    scrapes: list[Scrape] = field(default_factory=list)
    visits: list[Visit] = field(default_factory=list)
    taps: dict[str, Tap] = field(default_factory=dict)
    bounds: dict[str, float] = field(default_factory=dict)
    steps: list[tuple[float, float]] = field(default_factory=list)
    restart: tuple[float, float] | None = None
    # When the exporter first listened: its start (imports, configuration) is minutes of
    # simulated time at 100 x, more on a loaded machine, and its warm-up counts from here.
    listened: float = 0.0
    exits: list[tuple[int | None, float]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    wall: float = 0.0
    # What the simulator answered the old keys after the rotation.
    old_keys: dict[str, int] = field(default_factory=dict)
    # CPU seconds of the simulator and of the soak itself (the exporter's are in the samples).
    cpu: dict[str, float] = field(default_factory=dict)
    # Episode -> when its fault knobs were sent, and when they were cleared (each just before
    # the call): a soak loop late to wake sets them late, and the lags are counted from these.
    knobs: dict[str, tuple[float, float]] = field(default_factory=dict)

    def dump(self, path: Path, clock: SharedClock) -> None:
        """The record as JSON, times in simulated seconds since the start (for a look after)."""

        def rel(boots: list[float]) -> list[float]:
            return [round(clock.sim(b) - self.t0, 1) for b in boots]

        document = {
            "samples": [dataclasses.asdict(s) for s in self.samples],
            "scrapes": [dataclasses.asdict(x) for x in self.scrapes],
            "visits": [
                {"kind": v.episode.kind, "at": v.at, "targets": v.targets} for v in self.visits
            ],
            "taps": {
                t: {"requests": rel(x.requests), "accepted": rel(x.accepted)}
                for t, x in self.taps.items()
            },
            "t0": self.t0,
        }
        path.write_text(json.dumps(document, default=sorted))


class Soak:
    def __init__(self, run: float, speed: float, seed: int, episodes: list[Episode], workdir: Path):
        self.clock = SharedClock(speed, workdir)
        self.seed = seed
        self.episodes = episodes
        self.workdir = workdir
        self.record = Record(run, speed)
        self.expected = Expected(seed)
        self.simulator = Simulator(self.clock, seed)
        self.exporter: Exporter | None = None
        self.session: aiohttp.ClientSession | None = None
        # Which keys the exporter holds: what a gateway echoing its caller would echo.
        self.keys = "old"

    # -- time ------------------------------------------------------------------------------

    def now(self) -> float:
        """Simulated seconds since the exporter's first start."""
        return self.clock.sim() - self.record.t0

    async def until(self, at: float) -> None:
        """Sleep until the simulated moment `at` (seconds since the start)."""
        wait = self.clock.boot_at(self.record.t0 + at) - boottime()
        if wait > 0:
            await asyncio.sleep(wait)

    # -- the run ---------------------------------------------------------------------------

    async def run(self, say: Callable[[str], None]) -> Record:
        began = time.monotonic()
        self.clock.start()
        async with AsyncExitStack() as stack:
            stack.callback(self.clock.stop)
            self.simulator.start()
            stack.callback(self.simulator.stop)
            taps = TapThread(self.simulator.url, TARGETS, boottime)
            self.record.taps = taps.start()
            stack.callback(taps.stop)
            self.exporter = Exporter(
                self.clock, self.workdir, {t: tap.url for t, tap in self.record.taps.items()}
            )
            stack.callback(self.exporter.stop)
            self.session = await stack.enter_async_context(aiohttp.ClientSession())
            await self._credentials(
                {
                    "aihc": {KEYS["old"]["aihc_ak"]: KEYS["old"]["aihc_sk"]},
                    "alaya": [KEYS["old"]["alaya"]],
                }
            )
            self.exporter.write_keys("old")
            self.exporter.write_config()
            self.record.t0 = self.clock.sim()
            self._write_jobs_file(0.0)
            self.exporter.start()
            await asyncio.to_thread(self.exporter.listening)
            self.record.listened = self.now()
            say(f"exporter listening on {self.exporter.url}; simulator on {self.simulator.url}")
            tasks = [
                asyncio.create_task(self._bounds()),
                asyncio.create_task(self._scraper(gzip=True)),
                asyncio.create_task(self._scraper(gzip=False)),
                asyncio.create_task(self._sampler()),
                asyncio.create_task(self._jobs_file()),
                asyncio.create_task(self._progress(say)),
            ]
            try:
                await self._chaos(say)
                await self.until(self.record.run)
                await self._sample(collect=True)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            self.record.cpu = {
                "simulator": _cpu(self.simulator.process),
                "soak": time.process_time(),
            }
            await asyncio.to_thread(self.exporter.stop)
            self.record.exits = self.exporter.exits
            self.record.logs = self.exporter.log_lines()
        self.record.wall = time.monotonic() - began
        return self.record

    async def _progress(self, say: Callable[[str], None]) -> None:
        began, hour = time.monotonic(), 0
        while True:
            hour += 1
            await self.until(hour * 3600.0)
            last = self.record.samples[-1] if self.record.samples else None
            rss = f"; exporter RSS {last.exporter_rss} KiB" if last and last.exporter_rss else ""
            say(f"  {hour} h simulated in {time.monotonic() - began:.0f} s{rss}")

    # -- the simulator and the exporter ------------------------------------------------------

    async def _control(self, path: str, data: dict[str, Any] | None = None) -> Any:
        assert self.session is not None
        url = self.simulator.control + path
        if data is None:
            async with self.session.get(url) as reply:
                return await reply.json()
        async with self.session.post(url, json=data) as reply:
            return await reply.json()

    async def _credentials(self, keys: dict[str, Any]) -> None:
        await self._control("/credentials", keys)

    async def _bounds(self) -> None:
        """Each target's longest stale bound, as its status page gives it, once it has one."""
        for _ in range(600):
            doc = await self._json("/status.json")
            if doc is not None and all(t["tiers"] for t in doc["targets"]):
                for target in doc["targets"]:
                    self.record.bounds[target["target"]] = max(x["bound"] for x in target["tiers"])
                return
            await asyncio.sleep(0.05)

    async def _json(self, path: str) -> Any:
        text, _ = await self._get(path)
        return None if text is None else json.loads(text)

    async def _get(self, path: str, **headers: str) -> tuple[str | None, float | None]:
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

    async def _scraper(self, gzip: bool) -> None:
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

    async def _sampler(self) -> None:
        n = 0
        while True:
            n += 1
            await self.until(n * SAMPLE)
            await self._sample(collect=n % 10 == 0)

    async def _sample(self, collect: bool) -> None:
        assert self.exporter is not None
        at = self.now()
        sample = Sample(at, self.exporter.generation if self.exporter.pid else 0)
        pid = self.exporter.pid
        if pid is not None:
            sample.exporter_rss, sample.exporter_cpu = rss_kib(pid), cpu_seconds(pid)
        stats = await self._control("/stats" + ("?collect=1" if collect else ""))
        # Its clock between two reads of /proc/uptime (10 ms steps): the expected time then.
        earliest = self.clock.sim(stats["uptime"])
        sample.sim_clock = _outside(
            stats["time"], earliest, self.clock.sim(stats["uptime_after"] + 0.01), 0.0
        )
        sample.sim_rss, sample.collected = stats["rss_kib"], collect
        sample.sim_cpu = _cpu(self.simulator.process)
        before = boottime()
        text, date = await self._get("/metrics")
        if date is not None:
            sample.exporter_clock = _outside(date, self.clock.sim(before), self.clock.sim())
        if text is not None:
            _read_exposition(text, sample)
            sample.secrets = [s for s in SECRETS if s in text]
        self.record.samples.append(sample)

    # -- the jobs file -----------------------------------------------------------------------

    async def _jobs_file(self) -> None:
        turn = 0
        while True:
            turn += 1
            await self.until(turn * ROTATE)
            self._write_jobs_file(turn * ROTATE)

    def _write_jobs_file(self, at: float) -> None:
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

    # -- chaos -------------------------------------------------------------------------------

    async def _chaos(self, say: Callable[[str], None]) -> None:
        for episode in self.episodes:
            await self.until(episode.start)
            say(f"  {self.now() / 3600:5.2f} h: {episode.kind}")
            await self._episode(episode)

    async def _episode(self, e: Episode) -> None:
        assert self.exporter is not None
        if e.faults:
            keys = KEYS[self.keys]
            message = (
                f"simulated; you signed with access key {keys['aihc_ak']} and secret key "
                f"{keys['aihc_sk']}, api key {keys['alaya']}"
            )
            on = self.now()
            await self._control("/faults", {**e.faults, "message": message})
            # A soak loop late to send the knobs keeps them for their whole span all the same
            # (a Retry-After minute sent a minute late would be no pause at all).
            late = max(0.0, on - e.start)
            off = e.knobs_off + late
            visit = e.start + late + _visit_after(e)
            if visit < off:
                await self.until(visit)
                await self._visit(e)
            await self.until(off)
            self.record.knobs[e.kind] = (on, self.now())
            await self._control("/faults", {})
            if visit >= off:
                await self.until(visit)
                await self._visit(e)
            return
        actions = {
            "credential rotation": self._rotate,
            "bad reload": self._bad_reload,
            "wall-clock step": self._step,
            "restart": self._restart,
        }
        await actions[e.kind](e)

    async def _rotate(self, e: Episode) -> None:
        assert self.exporter is not None
        old, new = KEYS["old"], KEYS["new"]
        both = {old["aihc_ak"]: old["aihc_sk"], new["aihc_ak"]: new["aihc_sk"]}
        await self._credentials({"aihc": both, "alaya": [new["alaya"], old["alaya"]]})
        await self.until(e.start + 60)
        before = await self._reloaded_at()
        self.exporter.write_keys("new")
        self.keys = "new"
        self.exporter.signal(signal.SIGHUP)
        # The old keys go once the exporter has said it reloaded, and the calls signed with them
        # before have had two minutes to land, as an operator would revoke them (a loaded
        # machine can hold the reload for simulated minutes at 100 x).
        reloaded = e.start + 60
        while self.now() < e.start + 240 and await self._reloaded_at() == before:
            await asyncio.sleep(0.05)
            reloaded = self.now()
        await self.until(max(e.start + 180, reloaded + 120))
        await self._credentials({"aihc": {new["aihc_ak"]: new["aihc_sk"]}, "alaya": [new["alaya"]]})
        self.record.old_keys = await self._old_keys_refused()
        await self.until(e.start + 300)
        await self._visit(e)

    async def _reloaded_at(self) -> str | None:
        """The exporter's last successful reload, as it exports it (None: no answer)."""
        assert self.session is not None and self.exporter is not None
        try:
            async with self.session.get(self.exporter.url + "/metrics") as reply:
                text = await reply.text()
        except (aiohttp.ClientError, OSError):
            return None
        name = "training_exporter_config_last_reload_success_timestamp_seconds "
        return next((line for line in text.splitlines() if line.startswith(name)), None)

    async def _old_keys_refused(self) -> dict[str, int]:
        """What the simulator answers the old keys now (straight to it, past the taps)."""
        assert self.session is not None
        old = KEYS["old"]
        job, pods = next(iter(self.expected.alaya.running_at(self.clock.sim()).items()))
        url = f"{self.simulator.url}/v1/training/instance/{job}/{pods[0]}/basic"
        async with self.session.get(url, headers={"Authorization": f"Bearer {old['alaya']}"}) as r:
            # Alaya refuses in the body's status (HTTP 200), as the real service was seen to.
            alaya = int((await r.json())["status"])
        body = b"{}"
        params = {"action": "DescribeJobs", "resourcePoolId": DEMO_RESOURCE_POOL}
        now = self.clock.sim()
        headers = {
            "Host": self.simulator.url.removeprefix("http://"),
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "x-bce-date": canonical_time(now),
        }
        credentials = Credentials(old["aihc_ak"], old["aihc_sk"])
        headers["Authorization"] = sign(credentials, "POST", "/", headers, params, now)
        query = "&".join(f"{k}={v}" for k, v in params.items())
        async with self.session.post(
            f"{self.simulator.url}/?{query}", data=body, headers=headers
        ) as r:
            aihc = r.status
        return {"aihc": aihc, "alaya": alaya}

    async def _bad_reload(self, e: Episode) -> None:
        assert self.exporter is not None
        self.exporter.write_config(valid=False)
        self.exporter.signal(signal.SIGHUP)
        await self.until(e.start + 120)
        await self._visit(e)
        await self.until(e.start + 240)
        self.exporter.write_config()
        self.exporter.signal(signal.SIGHUP)

    async def _step(self, e: Episode) -> None:
        self.clock.step(STEP)
        self.record.steps.append((e.start, STEP))
        await self.until(e.start + 120)
        await self._visit(e)

    async def _restart(self, e: Episode) -> None:
        assert self.exporter is not None
        self.clock.step(0)
        self.record.steps.append((e.start, 0.0))
        await asyncio.to_thread(self.exporter.stop)
        self.exporter.start()
        await asyncio.to_thread(self.exporter.listening)
        ready = self.now()
        self.record.restart = (e.start, ready)
        await self.until(ready + 2 * ROUND)
        await self._visit(e)

    async def _visit(self, e: Episode) -> None:
        """Every status page during `e`: what each target shows, and any secret in them."""
        at = self.now()
        texts = []
        for path in (*PAGES, *(f"/targets/{t}{p}" for t in TARGETS for p in TARGET_PAGES)):
            text, _ = await self._get(path)
            texts.append(text or "")
        doc = await self._json("/status.json")
        targets = {t["target"]: t for t in doc["targets"]} if doc else {}
        found = [s for s in SECRETS for text in texts if s in text]
        self.record.visits.append(Visit(e, at, targets, found))


def _visit_after(e: Episode) -> float:
    """When to look at the pages during `e`: once the fault has shown (a round, a timeout and
    a checkpoint), within it; in a Retry-After pause, half way through it."""
    if "retry_after" in e.faults:
        return float(str(e.faults["retry_after"])) / 2
    shown = ROUND + TIMEOUT + 25.0
    return min(max(e.duration / 2, shown), e.duration - 5.0, 240.0)


def _cpu(process: Any) -> float:
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
