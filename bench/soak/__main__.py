"""`python -m bench.soak`: a simulated day (or any length) of the exporter under chaos.

    python -m bench.soak                          # 24 simulated hours at 60 x (24 min)
    python -m bench.soak --hours 1.5 --speed 60   # what the CI test runs (about 95 s)
    python -m bench.soak --seed 7 --keep DIR      # another schedule; keep the logs in DIR

See bench/README.md for what runs and what each check means.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.soak.checks import Checks
from bench.soak.procs import TIMEOUT
from bench.soak.run import Soak
from bench.soak.schedule import describe, schedule


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hours", type=float, default=24.0, help="simulated hours to run")
    p.add_argument("--speed", type=float, default=60.0, help="simulated seconds per second")
    p.add_argument("--seed", type=int, default=35)
    p.add_argument("--keep", type=Path, help="keep the exporter's logs and files here")
    args = p.parse_args(argv)
    run = args.hours * 3600
    episodes = schedule(args.seed, run, TIMEOUT)
    command = " ".join(["python -m bench.soak", *(argv if argv is not None else sys.argv[1:])])
    print(f"soak: {command}")
    minutes = run / args.speed / 60
    print(f"  {args.hours:g} simulated hours at {args.speed:g} x real time (~{minutes:.1f} min)")
    for line in describe(episodes, args.seed):
        print(line)
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    soak = Soak(run, args.speed, args.seed, episodes, workdir)
    began = time.monotonic()
    try:
        record = asyncio.run(soak.run(lambda line: print(line, flush=True)))
        if args.keep is not None:
            record.dump(workdir / "record.json", soak.clock)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    checks = Checks(record, episodes, soak.expected, soak.clock).all()
    wall = time.monotonic() - began
    print(
        f"checks ({len(record.samples)} samples, {len(record.scrapes)} scrapes, wall {wall:.0f} s):"
    )
    for check in checks:
        print(check.line())
    generations = {s.generation for s in record.samples if s.generation}
    record.cpu["exporter"] = sum(
        max(s.exporter_cpu or 0.0 for s in record.samples if s.generation == g) for g in generations
    )
    cpu = ", ".join(f"{k} {v:.0f} s" for k, v in record.cpu.items())
    print(f"CPU used: {cpu}")
    missed = [c for c in checks if not c.met]
    met = len(checks) - len(missed)
    print(
        f"soak: {met} of {len(checks)} checks met; speed-up {args.speed:g} x, "
        f"{args.hours:g} simulated hours in {record.wall:.0f} s"
    )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
