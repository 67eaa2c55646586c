"""`training-job-exporter backfill`: the command line.

Bad input (an unknown target, a window in the future or backwards, `--since` past what a
provider keeps, a configuration problem, another run's state beside the output) is one line on
stderr and exit code 2, before any call. Exit 0: every window of every job is in the file.
Exit 1: some could not be read (each reported on a line); the file holds the rest and running
the same command again reads only what is missing. Exit 130: interrupted; nothing is written
but the state, and the same command continues.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, NoReturn

from exporter.backfill.driver import Outcome, backfill, when
from exporter.backfill.progress import Progress
from exporter.backfill.remote_cli import (
    RemoteOptions,
    add_arguments,
    open_store,
    push,
    remote_options,
)
from exporter.backfill.remote_write import RemoteWriteClient, StoreStopped
from exporter.backfill.state import RunState, StateMismatch, state_dir
from exporter.backfill.writer import write_openmetrics
from exporter.config import ConfigError, load_settings, parse_duration
from exporter.configkit import TargetBase
from exporter.logs import configure_logging
from exporter.providers.kit.history import HistoryReader
from exporter.providers.registry import spec_of
from exporter.redaction import redactor
from exporter.selfmetrics import SelfMetrics
from exporter.targets import tier_plan

EXIT_OK: Final = 0
EXIT_INCOMPLETE: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130
# A quarter of the live default (10/s), so the exporter and a backfill share one account.
DEFAULT_REQUESTS_PER_SECOND: Final = 2.0
# How far past now `--until` may be: clocks disagree by a little.
CLOCK_SLACK: Final = 60.0


class BadInput(Exception):
    """One line for the user, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not argparse's usage block.
        print(f"backfill: {message} (see --help)", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="training-job-exporter backfill",
        description="Write the history the provider APIs hold as OpenMetrics with timestamps, "
        "for `promtool tsdb create-blocks-from openmetrics FILE DIR`.",
    )
    p.add_argument("--config", "--config.file", dest="config", metavar="PATH")
    p.add_argument(
        "--since",
        required=True,
        metavar="WHEN",
        help="start of the window: a duration back from now (7d, 36h) or a time "
        "(2026-11-30T00:00:00Z, unix seconds)",
    )
    p.add_argument("--until", metavar="WHEN", help="end of the window (default: now)")
    p.add_argument("--target", action="append", metavar="NAME", help="only this target")
    p.add_argument("--job", action="append", nargs="+", metavar="ID", help="only these jobs")
    p.add_argument(
        "--requests-per-second",
        type=float,
        metavar="N",
        help=f"request budget per target (default {DEFAULT_REQUESTS_PER_SECOND:g})",
    )
    p.add_argument(
        "--output",
        required=True,
        metavar="FILE",
        help="the OpenMetrics file (with --remote-write: what the store does not take); the "
        "resume state is beside it",
    )
    p.add_argument(
        "--log.level", dest="log_level", default="warning", choices=["debug", "info", "warning"]
    )
    add_arguments(p)
    return p


def parse_when(text: str, now: float, flag: str) -> float:
    """Unix seconds, a duration back from `now` (7d, 36h), or an ISO 8601 time (UTC unless it
    says otherwise)."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(
            f"{flag} {text!r}: not a duration (7d, 36h) or a time (2026-11-30T00:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _targets(settings_targets: list[TargetBase], names: list[str] | None) -> Any:
    if not names:
        return settings_targets
    known = {t.name: t for t in settings_targets}
    for name in names:
        if name not in known:
            raise BadInput(
                f"--target {name!r}: no such target (targets: {', '.join(known) or 'none'})"
            )
    return [known[n] for n in dict.fromkeys(names)]


def _reader(target: TargetBase, metrics: SelfMetrics) -> HistoryReader:
    history = spec_of(target).history
    if history is None:
        raise BadInput(f"target {target.name}: its provider has no history to backfill")
    # The history reads every configured item at once; the tiers only fill the signature.
    return history(target, metrics, tier_plan(target, 60.0))


@dataclass(frozen=True)
class Checked:
    """The flags, checked: which targets, at what rate, over what window, and where to."""

    targets: list[TargetBase]
    rps: float
    # (now, since, until, --since as given)
    window: tuple[float, float, float, str]
    params: dict[str, Any]
    remote: RemoteOptions | None


def main(argv: Sequence[str]) -> int:
    """Bad input is refused before the configured secrets are registered with the redactor
    and logging is set up: nothing is set up for a run that does not start."""
    args = parser().parse_args(list(argv))
    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(redactor.mask(problem), file=sys.stderr)
        return EXIT_USAGE
    try:
        checked = check(args, settings.targets())
    except BadInput as exc:
        print(f"backfill: {exc}", file=sys.stderr)
        return EXIT_USAGE
    redactor.add(settings.secrets())
    if checked.remote is not None:
        redactor.add(checked.remote.auth.secrets())
    configure_logging(args.log_level, "console")
    try:
        return asyncio.run(_main(checked, Path(args.output)))
    except BadInput as exc:
        print(f"backfill: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        # Before the run's own handler is in place: nothing was read yet.
        print("backfill: interrupted before any window was read", file=sys.stderr)
        return EXIT_INTERRUPTED


def check(args: argparse.Namespace, all_targets: list[TargetBase]) -> Checked:
    """The flags that need no call and no file but the configuration; `BadInput` names one."""
    now = time.time()
    since = parse_when(args.since, now, "--since")
    until = parse_when(args.until, now, "--until") if args.until else now
    if since > now + CLOCK_SLACK:
        raise BadInput(f"--since {args.since}: {when(since)} is in the future")
    if until > now + CLOCK_SLACK:
        raise BadInput(f"--until {args.until}: {when(until)} is in the future")
    if since >= until:
        raise BadInput(f"--since ({when(since)}) must be before --until ({when(until)})")
    rps = args.requests_per_second or DEFAULT_REQUESTS_PER_SECOND
    if rps <= 0:
        raise BadInput("--requests-per-second must be above 0")
    targets = _targets(all_targets, args.target)
    if not targets:
        raise BadInput("no target configured")
    try:
        remote = remote_options(args)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    params = {
        "config": str(Path(args.config).resolve()) if args.config else None,
        "since": args.since,
        "until": args.until,
        "targets": [t.name for t in targets],
        "jobs": sorted({j for group in args.job or [] for j in group}),
    }
    if remote is not None:
        # Another store's state is not this one's record of what was sent.
        params["remote_write"] = remote.url
    return Checked(targets, rps, (now, since, until, args.since), params, remote)


async def _main(checked: Checked, output: Path) -> int:
    now, since, until, since_text = checked.window
    remote, params = checked.remote, checked.params
    metrics = SelfMetrics()
    readers = [_reader(t.at_rate(checked.rps), metrics) for t in checked.targets]
    client = None
    try:
        for reader in readers:
            kept = reader.retention()
            if kept is not None and now - since > kept[0]:
                raise BadInput(
                    f"--since {since_text}: {reader.provider} target {reader.target} keeps "
                    f"{kept[0] / 86400:g} days of history ({kept[1]})"
                )
        pushing = None
        if remote is not None:
            try:
                client = (await open_store(remote))[0]
            except StoreStopped as exc:
                raise BadInput(f"--remote-write: {exc}") from None
            pushing = (remote, client)
        try:
            state = RunState.open(output, params, since, until)
        except StateMismatch as exc:
            raise BadInput(str(exc)) from None
        return await _backfill(readers, state, output, set(params["jobs"]) or None, pushing)
    finally:
        for reader in readers:
            await reader.close()
        if client is not None:
            await client.close()


async def _backfill(
    readers: Sequence[Any],
    state: RunState,
    output: Path,
    jobs: Any,
    pushing: tuple[RemoteOptions, RemoteWriteClient] | None,
) -> int:
    progress = Progress()
    if state.resumed:
        print(
            f"backfill: resuming from {state_dir(output)} "
            f"({when(state.since)} to {when(state.until)})",
            file=sys.stderr,
        )
    outcome = await _read(readers, state, progress, jobs)
    if outcome is None:
        print(
            f"backfill: interrupted after {progress.windows_done} of "
            f"{progress.windows_total} windows this run (known so far); what was read is kept in "
            f"{state_dir(output)}: run the same command again to continue",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    for problem in outcome.problems:
        print(f"backfill: {problem}", file=sys.stderr)
    if pushing is not None:
        return await push(outcome, state, output, *pushing)
    return _write(outcome, state, output)


async def _read(
    readers: Sequence[Any], state: RunState, progress: Progress, jobs: Any
) -> Outcome | None:
    """Every window the state lacks; None when interrupted (Ctrl-C, SIGTERM)."""
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        return await backfill(readers, state, progress, jobs=jobs)
    except asyncio.CancelledError:
        return None
    finally:
        progress.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _write(outcome: Outcome, state: RunState, output: Path) -> int:
    if not outcome.listed and not outcome.written:
        print(
            "backfill: nothing written; run the same command again to continue",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    started = time.monotonic()
    samples = write_openmetrics(output, sorted(outcome.written, key=lambda job: job.order))
    took = time.monotonic() - started
    if outcome.ok:
        state.remove()
        print(
            f"backfill: wrote {samples} samples of {len(outcome.written)} jobs to {output} "
            f"in {took:.2f} s",
            file=sys.stderr,
        )
        return EXIT_OK
    missing = f"{outcome.windows_left} windows" if outcome.windows_left else "some history"
    print(
        f"backfill: wrote {samples} samples to {output}, but {missing} could not be read "
        f"(see above); run the same command again to read only what is missing "
        f"(state in {state_dir(output)})",
        file=sys.stderr,
    )
    return EXIT_INCOMPLETE
