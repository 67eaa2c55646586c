"""One accelerated clock for several processes: libfaketime with a shared start.

libfaketime's `+0 xS` runs a process's clocks S times as fast from the moment it starts, so two
processes started a moment apart drift apart by that moment times S, and a restarted one
starts over. Its `faketime` wrapper keeps the start in shared memory (`FAKETIME_SHARED`) for
every process of its environment: a holder process runs under the wrapper for the whole soak,
and every process the soak starts (the simulator, the exporter, the exporter again after its
restart) takes that environment, so all of them read one clock.

The soak itself runs on the real clock and reads CLOCK_BOOTTIME, which /proc/uptime shows to
the faked processes too (libfaketime does not fake a file). A probe under the shared clock
reads its fake time at the moment /proc/uptime ticks, which ties the two: simulated time =
F0 + (boottime - B0) x S. Each side's answers (the simulator's clock, the exporter's Date
headers) are then checked against that expected time.

The exporter alone reads its offset from a file, so the soak can step its wall clock.
libfaketime derives the monotonic clock from the same offset: a step moves both, as a VM
paused and resumed would see.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from pathlib import Path

PROBE = """
import time
def up():
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])
start = up()
while (tick := up()) == start:
    pass
print(time.time(), tick)
"""


def boottime() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def library() -> str:
    """Debian's multi-threaded libfaketime (package faketime), whatever the architecture."""
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not found:
        raise SystemExit("libfaketime is missing: run .ci/install-tools (Debian's faketime)")
    return found[0]


class SharedClock:
    """The soak's simulated clock: `sim(boottime)`, and the environment that puts a process
    on it."""

    def __init__(self, speed: float, workdir: Path) -> None:
        self.speed = speed
        self.offset_file = workdir / "exporter-faketime"
        self._holder: subprocess.Popen[str] | None = None
        self._shared = ""
        self.f0 = self.b0 = 0.0

    def start(self) -> None:
        spec = self.spec()
        self._holder = subprocess.Popen(
            ["faketime", "-f", spec, "sh", "-c", 'echo "$FAKETIME_SHARED"; exec cat >/dev/null'],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._holder.stdout is not None
        self._shared = self._holder.stdout.readline().strip()
        if not self._shared:
            raise SystemExit("faketime gave no shared clock (FAKETIME_SHARED)")
        self.step(0)
        probe = subprocess.run(
            [sys.executable, "-c", PROBE],
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
        )
        fake, tick = probe.stdout.split()
        self.f0, self.b0 = float(fake), float(tick)

    def spec(self, offset: float = 0.0) -> str:
        return f"{offset:+.0f} x{self.speed:g}"

    def env(self, stepped: bool = False) -> dict[str, str]:
        """This process's environment on the shared clock; `stepped`: its offset from the
        file `step` writes (the exporter's), else none."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TJE_", "FAKETIME"))}
        return {**env, **self.preload(stepped)}

    def preload(self, stepped: bool = False) -> dict[str, str]:
        """The variables that put a process on the shared clock. A process given its own
        clock instead (LD_PRELOAD and FAKETIME alone) leaves a segment and a semaphore in
        /dev/shm behind; one on the holder's shares the holder's, which goes with it."""
        found = {"LD_PRELOAD": library(), "FAKETIME_SHARED": self._shared}
        if stepped:
            found.update(FAKETIME_TIMESTAMP_FILE=str(self.offset_file), FAKETIME_CACHE_DURATION="1")
        else:
            found["FAKETIME"] = self.spec()
        return found

    def step(self, offset: float) -> None:
        """Put the stepped process's clocks `offset` seconds ahead of the shared clock."""
        self.offset_file.write_text(self.spec(offset) + "\n")

    def sim(self, at: float | None = None) -> float:
        """The simulated time (unix seconds) at boottime `at` (now)."""
        return self.f0 + ((boottime() if at is None else at) - self.b0) * self.speed

    def boot_at(self, sim: float) -> float:
        """The boottime at which the simulated clock reads `sim`."""
        return self.b0 + (sim - self.f0) / self.speed

    def stop(self) -> None:
        """End the holder: its stdin closes, `cat` ends, the wrapper removes the shared memory."""
        if self._holder is None:
            return
        for pipe in (self._holder.stdin, self._holder.stdout):
            if pipe is not None:
                pipe.close()
        self._holder.wait(10)
