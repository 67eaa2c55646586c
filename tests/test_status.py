"""exporter.status: the bounded call log and redaction the status pages read."""

from __future__ import annotations

from exporter.redaction import REDACTED, redact
from exporter.status import RECENT_CALLS, RECENT_FAILURES, CallLog, CallRecord, Health


def _record(at: float, ok: bool) -> CallRecord:
    return CallRecord(at, "DescribeJob", "job-1", "200" if ok else "500", 1, 0.01, 10, ok)


def test_the_rings_keep_the_last_calls_and_failures_and_count_failures_since_success() -> None:
    now = [1000.0]
    log = CallLog(clock=lambda: now[0])
    for i in range(RECENT_CALLS + 10):
        log.add(_record(1000.0 + i / 100, ok=i % 3 != 0))
    assert len(log.recent) == RECENT_CALLS
    assert len(log.failures) == RECENT_FAILURES
    log.add(_record(1003.0, ok=False))
    log.add(_record(1003.1, ok=False))
    assert log.failed_since_success == 2
    assert log.last_error is not None and log.last_error.at == 1003.1
    now[0] = 1062.5
    assert log.finished_last_minute() == 2 + sum(
        1 for i in range(RECENT_CALLS + 10) if i / 100 >= 2.5
    )


def test_redact_removes_query_strings_credentials_and_signatures() -> None:
    text = (
        "GET https://h/v1/x?accessKey=AKID123&sig=zz failed: Authorization: "
        "bce-auth-v1/AKID123/2026-12-04T00:00:00Z/1800/host/abcdef Bearer sk-live-999 "
        'password="hunter2" token=abc'
    )
    out = redact(text)
    for secret in ("AKID123", "abcdef", "sk-live-999", "hunter2", "abc", "zz"):
        assert secret not in out.replace(REDACTED, ""), (secret, out)
    assert len(redact("x" * 5000)) == 300


def test_health_keeps_since_until_the_state_changes() -> None:
    health = Health()
    health.set("down", 10.0)
    health.set("down", 20.0)
    assert (health.state, health.since) == ("down", 10.0)
    health.set("up", 30.0)
    assert (health.state, health.since) == ("up", 30.0)


def test_job_track_keeps_only_listed_jobs_and_counts_failures() -> None:
    from exporter.status import JobTrack

    track = JobTrack()
    track.read("a", "fast", ok=True, now=1.0)
    track.read("a", "slow", ok=False, now=2.0)
    track.read("b", "fast", ok=True, now=3.0)
    track.keep({"a": ["info"]})
    assert list(track.jobs) == ["a"]
    reads = track.jobs["a"]
    assert reads.last_read == {"fast": 1.0, "slow": 2.0}
    assert reads.last_good == {"fast": 1.0}
    assert (reads.failures, reads.last_failure_at) == (1, 2.0)


def test_a_read_keeps_every_field_it_does_not_set() -> None:
    # `read` builds its JobReads by naming each field: a field added and not named there
    # would go back to its default at every read, and the pages would lose it.
    from dataclasses import fields

    from exporter.status import JobReads, JobTrack

    set_by_read = {"last_read", "last_good", "failures", "last_failure_at"}
    kept = JobReads(
        name="n", status="Running", named_at=5.0, pods={"info": frozenset({"p0"})}, pods_at=6.0
    )
    others = [f.name for f in fields(JobReads) if f.name not in set_by_read]
    # A field added to JobReads needs a value apart from its default above.
    assert [n for n in others if getattr(kept, n) == getattr(JobReads(), n)] == []
    track = JobTrack()
    track.jobs["a"] = kept
    track.read("a", "fast", ok=False, now=7.0)
    after = track.jobs["a"]
    assert {n: getattr(after, n) for n in others} == {n: getattr(kept, n) for n in others}
    assert (after.last_read, after.failures, after.last_failure_at) == ({"fast": 7.0}, 1, 7.0)


def test_redact_removes_a_key_after_its_scheme_and_a_signature_after_signed_headers() -> None:
    # As a provider echoes the headers it was sent: the scheme is not the secret, the key is;
    # a bce-auth-v1 signature comes after its `;`-separated signed headers.
    echoed = (
        'you sent {"Authorization": "Bearer sk-live-999"}, Authorization: Basic dXNlcjpwdw== '
        "and Authorization: bce-auth-v1/AKID123/2026-12-04T00:00:00Z/1800/host;x-bce-date/"
        "f00dfeed"
    )
    out = redact(echoed)
    for secret in ("sk-live-999", "dXNlcjpwdw", "AKID123", "f00dfeed"):
        assert secret not in out, (secret, out)
