"""`backfill --remote-write URL`: its flags, checked before any call, and its run and report.

The history is read into the same resume state as for the file; then sent (`push`), and what
did not go (older than the store takes, refused) is written to `--output` for promtool. The
state stays when everything went: it is the record of what was sent, so the same command again
sends nothing; deleting it sends everything again.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

from exporter.backfill.driver import Outcome
from exporter.backfill.plan import SendState
from exporter.backfill.progress import SendProgress
from exporter.backfill.push import Interrupted, Sender, Totals
from exporter.backfill.remote_write import (
    Auth,
    RemoteWriteClient,
    StoreStopped,
    base_url,
    read_secret,
)
from exporter.backfill.state import RunState, state_dir
from exporter.backfill.stores import Store, probe, store_duration, victoria_counters
from exporter.backfill.writer import write_openmetrics

EXIT_OK: Final = 0
EXIT_INCOMPLETE: Final = 1
EXIT_INTERRUPTED: Final = 130
# The protocol's own headers, and those the flags set.
RESERVED_HEADERS: Final = frozenset(
    {
        "content-encoding",
        "content-type",
        "x-prometheus-remote-write-version",
        "authorization",
        "user-agent",
        "host",
        "content-length",
    }
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("remote write (instead of promtool)")
    g.add_argument(
        "--remote-write",
        metavar="URL",
        help="send the history to this Prometheus remote-write endpoint; --output then gets "
        "only what the store does not take, for promtool",
    )
    g.add_argument("--remote-write.username", dest="rw_username", metavar="USER")
    g.add_argument("--remote-write.password-file", dest="rw_password_file", metavar="FILE")
    g.add_argument("--remote-write.bearer-token-file", dest="rw_token_file", metavar="FILE")
    g.add_argument(
        "--remote-write.header",
        dest="rw_headers",
        action="append",
        metavar="NAME=VALUE",
        help="an extra header, e.g. X-Scope-OrgID=tenant (repeatable)",
    )
    g.add_argument("--remote-write.ca-file", dest="rw_ca_file", metavar="FILE")
    g.add_argument("--remote-write.cert-file", dest="rw_cert_file", metavar="FILE")
    g.add_argument("--remote-write.key-file", dest="rw_key_file", metavar="FILE")
    g.add_argument(
        "--remote-write.window",
        dest="rw_window",
        metavar="DURATION",
        help="how far behind its newest sample the store takes samples (e.g. 1h, 30d, "
        "unlimited); default: asked from a Prometheus or VictoriaMetrics",
    )


@dataclass(frozen=True)
class RemoteOptions:
    url: str
    auth: Auth
    # Seconds; 0: unlimited; None: ask the store.
    window: float | None


def _headers(values: list[str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name or any(c in name for c in " :\t\r\n") or "\n" in value:
            raise ValueError(f"--remote-write.header {item!r}: want NAME=VALUE")
        if name.lower() in RESERVED_HEADERS:
            raise ValueError(f"--remote-write.header {name}: set by the backfill itself")
        headers[name] = value
    return headers


def _auth(args: argparse.Namespace) -> Auth:
    if args.rw_password_file and not args.rw_username:
        raise ValueError("--remote-write.password-file needs --remote-write.username")
    if args.rw_username and not args.rw_password_file:
        raise ValueError("--remote-write.username needs --remote-write.password-file")
    if args.rw_username and args.rw_token_file:
        raise ValueError("basic auth or a bearer token, not both")
    if bool(args.rw_cert_file) != bool(args.rw_key_file):
        raise ValueError("--remote-write.cert-file and --remote-write.key-file go together")
    auth = Auth(
        user=args.rw_username,
        password=read_secret(args.rw_password_file, "--remote-write.password-file")
        if args.rw_password_file
        else None,
        token=read_secret(args.rw_token_file, "--remote-write.bearer-token-file")
        if args.rw_token_file
        else None,
        headers=_headers(args.rw_headers),
        ca_file=args.rw_ca_file,
        cert_file=args.rw_cert_file,
        key_file=args.rw_key_file,
    )
    auth.ssl_context()
    return auth


def remote_options(args: argparse.Namespace) -> RemoteOptions | None:
    """The remote-write flags, checked; None without `--remote-write`. ValueError for the
    user: one line naming the flag. The caller registers `auth.secrets()` with the redactor."""
    url = args.remote_write
    given = [k for k, v in vars(args).items() if k.startswith("rw_") and v]
    if url is None:
        if given:
            raise ValueError("--remote-write.* options need --remote-write URL")
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--remote-write {url!r}: want an http:// or https:// URL")
    if parts.username or parts.password:
        raise ValueError(
            "--remote-write: no credentials in the URL; use --remote-write.username and "
            "--remote-write.password-file"
        )
    window = None
    if args.rw_window is not None:
        text = args.rw_window.strip()
        try:
            window = 0.0 if text == "unlimited" else store_duration(text)
        except ValueError:
            raise ValueError(f"--remote-write.window {text!r}: a duration or unlimited") from None
    return RemoteOptions(url, _auth(args), window)


async def open_store(options: RemoteOptions) -> tuple[RemoteWriteClient, Store]:
    """The client and what its store takes; `StoreStopped` when it cannot be reached."""
    client = RemoteWriteClient(options.url, options.auth)
    try:
        store = await probe(client, options.window)
    except BaseException:
        await client.close()
        raise
    print(f"backfill: remote write to {client.shown}: {store.describe()}", file=sys.stderr)
    return client, store


def _on_signals(stop: asyncio.Event) -> None:
    """Ctrl-C or SIGTERM: stop after the batch in flight; again: at once."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def first() -> None:
        stop.set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, first)


@dataclass(slots=True)
class Run:
    """This run's sending: why it stopped (None: it did not), and what it sent in how long."""

    stopped: str | None
    # From the round's planning to the last answer.
    seconds: float
    sent: int


async def _send(
    send: SendState, client: RemoteWriteClient, options: RemoteOptions, started: float
) -> Run:
    """Send every round."""
    store = await probe(client, options.window)
    total = sum(sum(r.slices.values()) for r in send.rounds)
    progress = SendProgress(total)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    _on_signals(stop)
    sender = Sender(send, client, store, stop, progress)
    stopped = None
    try:
        await sender.run()
    except Interrupted:
        stopped = "interrupted"
    except StoreStopped as exc:
        stopped = str(exc)
    finally:
        progress.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    seconds = time.monotonic() - started
    root = base_url(client.url)
    if stopped is None and store.kind == "VictoriaMetrics" and root is not None:
        _victoria_dropped(store, await victoria_counters(client, root))
    return Run(stopped, seconds, sender.sent)


def _victoria_dropped(store: Store, after: tuple[float, dict[str, int]]) -> None:
    grown = {k: v - store.dropped.get(k, 0) for k, v in after[1].items()}
    grown = {k: v for k, v in grown.items() if v > 0}
    if grown:
        print(
            "backfill: while it was sent, VictoriaMetrics dropped rows (store-wide counters, "
            "other writers' too): " + ", ".join(f"{k} {v}" for k, v in sorted(grown.items())),
            file=sys.stderr,
        )


def _report(totals: Totals, client: RemoteWriteClient, run: Run) -> None:
    rate = run.sent / run.seconds if run.seconds > 0 else 0.0
    retried = ", ".join(f"{n} after {c}" for c, n in sorted(client.retried.items())) or "none"
    print(
        f"backfill: remote write: {totals.sent} samples sent in {totals.batches} batches; "
        f"this run {run.sent} in {client.requests} requests in {run.seconds:.2f} s "
        f"({rate:.0f} samples/s), retries: {retried}",
        file=sys.stderr,
    )
    for why, samples in sorted(totals.refused.items()):
        print(
            f"backfill: the store refused {samples} samples ({totals.refused_batches[why]} "
            f"batches) as {why}: {totals.messages[why]}",
            file=sys.stderr,
        )
    if totals.older:
        print(
            f"backfill: {totals.older} samples are older than the store takes: kept back",
            file=sys.stderr,
        )


def _write_rest(send: SendState, output: Path) -> None:
    """What did not go, as the promtool file (written again each run, from every round)."""
    rest = send.rest()
    if not rest:
        return
    kept = write_openmetrics(output, rest)
    print(
        f"backfill: the {kept} samples that did not go are in {output}: "
        f"`promtool tsdb create-blocks-from openmetrics {output} DIR` makes blocks of them "
        "for a Prometheus data directory (a VictoriaMetrics drops what is outside its "
        "retention by any path)",
        file=sys.stderr,
    )


async def push(
    outcome: Outcome,
    state: RunState,
    output: Path,
    options: RemoteOptions,
    client: RemoteWriteClient,
) -> int:
    """Send what was read, write what did not go, report; the exit code."""
    started = time.monotonic()
    send = SendState(state.path)
    send.plan(outcome.complete)
    run = await _send(send, client, options, started)
    totals = Totals.of(send.rounds)
    _report(totals, client, run)
    _write_rest(send, output)
    where = state_dir(output)
    if run.stopped == "interrupted":
        print(
            f"backfill: interrupted; what was sent is recorded in {where}: run the same command "
            "again to continue",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if run.stopped is not None:
        print(
            f"backfill: sending stopped: {run.stopped}; run the same command again to continue",
            file=sys.stderr,
        )
        return EXIT_INCOMPLETE
    if not outcome.ok:
        return EXIT_INCOMPLETE
    print(
        f"backfill: every window read was sent or kept; {where} records it, so the same command "
        "again sends nothing (delete it to send everything again)",
        file=sys.stderr,
    )
    return EXIT_OK
