"""The soak's driver: it starts the processes and the taps, runs the tasks beside them
(bench/soak/tasks.py) and plays the chaos schedule, episode by episode.

Everything here runs on the real clock (CLOCK_BOOTTIME) and waits for simulated moments
through the shared clock's mapping; what it records (bench/soak/record.py) is in simulated
seconds since the exporter's first start (`Record.t0`).
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path

import aiohttp

from bench.soak.clock import boottime
from bench.soak.procs import KEYS, ROUND, SECRETS, TIMEOUT, Exporter
from bench.soak.record import Record, Visit
from bench.soak.schedule import TARGETS, Episode
from bench.soak.taps import TapThread
from bench.soak.tasks import Tasks, cpu
from exporter.providers.aihc.signer import Credentials, canonical_time, sign
from exporter.simulator.aihc import DEMO_RESOURCE_POOL

PAGES = ("/", "/status.json")
# The wall-clock step: half a timeout, so calls under way as it comes do not time out (libfaketime
# moves the monotonic clock with it).
STEP = 30.0
TARGET_PAGES = ("/jobs", "/jobs.json", "/calls", "/calls.json")


class Soak(Tasks):
    def __init__(self, run: float, speed: float, seed: int, episodes: list[Episode], workdir: Path):
        super().__init__(run, speed, seed, workdir)
        self.episodes = episodes
        # Which keys the exporter holds: what a gateway echoing its caller would echo.
        self.keys = "old"

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
            await self.credentials(
                {
                    "aihc": {KEYS["old"]["aihc_ak"]: KEYS["old"]["aihc_sk"]},
                    "alaya": [KEYS["old"]["alaya"]],
                }
            )
            self.exporter.write_keys("old")
            self.exporter.write_config()
            self.record.t0 = self.clock.sim()
            self.write_jobs_file(0.0)
            self.exporter.start()
            await asyncio.to_thread(self.exporter.listening)
            self.record.listened = self.now()
            say(f"exporter listening on {self.exporter.url}; simulator on {self.simulator.url}")
            tasks = [
                asyncio.create_task(self.bounds()),
                asyncio.create_task(self.scraper(gzip=True)),
                asyncio.create_task(self.scraper(gzip=False)),
                asyncio.create_task(self.sampler()),
                asyncio.create_task(self.jobs_file()),
                asyncio.create_task(self.progress(say)),
            ]
            try:
                await self._chaos(say)
                await self.until(self.record.run)
                await self.sample(collect=True)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            self.record.cpu = {
                "simulator": cpu(self.simulator.process),
                "soak": time.process_time(),
            }
            await asyncio.to_thread(self.exporter.stop)
            self.record.exits = self.exporter.exits
            self.record.logs = self.exporter.log_lines()
        self.record.wall = time.monotonic() - began
        return self.record

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
            await self.control("/faults", {**e.faults, "message": message})
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
            await self.control("/faults", {})
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
        await self.credentials({"aihc": both, "alaya": [new["alaya"], old["alaya"]]})
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
        await self.credentials({"aihc": {new["aihc_ak"]: new["aihc_sk"]}, "alaya": [new["alaya"]]})
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
            text, _ = await self.get(path)
            texts.append(text or "")
        doc = await self.page_json("/status.json")
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
