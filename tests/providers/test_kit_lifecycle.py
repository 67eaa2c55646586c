"""`kit.lifecycle`: first Running, queue wait and restart time from what lists and reads show,
and a failed job's verdict once every read it is due is made."""

from __future__ import annotations

from exporter.providers.kit.failures import Classifier, Evidence, Rule
from exporter.providers.kit.lifecycle import (
    ENDED,
    FAILED,
    RESTARTING,
    RUNNING,
    WAITING,
    Lifecycles,
    from_timeline,
)

CREATED = 1_000.0
NONE = (None, None)


def lives() -> Lifecycles:
    rules = [Rule("oom", "OOMKilled", None, "inferred", "OOMKilled")]
    return Lifecycles(Classifier(rules), "aihc", "t")


def test_a_waiting_job_waits_until_now_then_its_first_running_is_fixed() -> None:
    life = lives()
    assert life.listed("j", WAITING, CREATED, NONE, 1_300.0).queue_wait == 300.0
    # Seen running at the next list: it started by then (within a poll).
    timing = life.listed("j", RUNNING, CREATED, NONE, 1_360.0)
    assert (timing.started, timing.queue_wait) == (1_360.0, 360.0)
    later = life.listed("j", RESTARTING, CREATED, NONE, 2_000.0)
    assert (later.started, later.queue_wait) == (1_360.0, 360.0)


def test_a_job_first_seen_running_has_no_start_unless_the_provider_gives_one() -> None:
    life = lives()
    assert life.listed("j", RUNNING, CREATED, NONE, 5_000.0).queue_wait is None
    # The provider's running seconds: the earliest estimate holds (replies lag a little).
    assert life.listed("j", RUNNING, CREATED, (None, 3_000.0), 5_000.0).started == 2_000.0
    assert life.listed("j", RUNNING, CREATED, (None, 3_050.0), 5_100.0).started == 2_000.0
    assert life.listed("j", RUNNING, CREATED, (None, 3_100.0), 5_050.0).started == 1_950.0
    # A finished job's running seconds count back from its end, not from now.
    assert life.listed("k", ENDED, CREATED, (4_000.0, 1_000.0), 9_000.0).started == 3_000.0


def test_a_job_that_never_ran_has_no_wait_once_it_ended() -> None:
    life = lives()
    life.listed("j", WAITING, CREATED, NONE, 1_100.0)
    timing = life.listed("j", FAILED, CREATED, (1_150.0, 0.0), 1_200.0)
    assert (timing.started, timing.queue_wait) == (None, None)


def test_the_timeline_gives_the_exact_start_and_the_time_spent_restarting() -> None:
    entries = [
        (CREATED, WAITING),
        (1_100.0, RUNNING),
        (1_500.0, RESTARTING),
        (1_560.0, RUNNING),
        (2_000.0, WAITING),
        (2_300.0, RUNNING),
        (3_000.0, FAILED),
        (3_100.0, RESTARTING),
    ]
    assert from_timeline(entries, 9_000.0) == (1_100.0, 360.0)
    assert from_timeline(entries[:5], 2_100.0) == (1_100.0, 160.0)
    assert from_timeline([(CREATED, WAITING)], 2_000.0) == (None, None)
    life = lives()
    life.listed("j", RUNNING, CREATED, (None, 9_999.0), 10_000.0)
    assert life.timeline("j", entries[:4], 10_000.0) == 60.0
    timing = life.listed("j", RUNNING, CREATED, (None, 9_999.0), 10_000.0)
    assert (timing.started, timing.queue_wait) == (1_100.0, 100.0)
    assert life.timeline("j", [(CREATED, WAITING)], 10_000.0) is None
    assert life.listed("j", RUNNING, CREATED, NONE, 10_000.0).started == 1_100.0


def test_a_failed_job_s_verdict_waits_for_every_read_it_is_due() -> None:
    life = lives()
    life.listed("j", RUNNING, CREATED, NONE, 1_100.0)
    life.evidence("j", [Evidence("OOMKilled", "", True)])  # before it failed: not evidence
    life.listed("j", FAILED, CREATED, NONE, 1_200.0)
    assert life.expect("j", ("pods", "events"))
    life.evidence("j", [Evidence("OOMKilled", "", True)])
    life.read_done("j", "pods")
    assert life.verdict("j") is None and life.expect("j", ())
    life.read_done("j", "events")  # failed: what the pods read found decides
    verdict = life.verdict("j")
    assert verdict is not None and verdict.failure_class == "oom"
    assert not life.expect("j", ("pods", "events"))
    # Running again (requeued), then failed again: a new verdict is due.
    life.listed("j", RUNNING, CREATED, NONE, 1_300.0)
    life.listed("j", FAILED, CREATED, NONE, 1_400.0)
    assert life.verdict("j") is None and life.expect("j", ("events",))


def test_forgotten_jobs_keep_nothing() -> None:
    life = lives()
    life.listed("j", FAILED, CREATED, NONE, 1_200.0)
    life.expect("j", ("events",))
    life.keep(set())
    assert not life.expect("j", ("events",)) and life.verdict("j") is None
