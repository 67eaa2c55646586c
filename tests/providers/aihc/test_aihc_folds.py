"""Label values from replies past their caps: exported as `other`, and logged once a minute per
target and label, never once per job or per poll (the real AihcProvider against the
simulator over HTTP)."""

from __future__ import annotations

from collections import Counter

from structlog.testing import capture_logs

from exporter.metrics import KNOWN_JOB_STATUSES
from exporter.providers.aihc.mapping import MAX_EVENT_REASONS
from exporter.providers.kit.states import MAX_STATES
from exporter.simulator.aihc import AihcWorld
from tests.providers.aihc.aihc_helpers import POOL, Harness, jobs, labels, named, samples

FOLDED = "label values past their cap exported as other"


async def test_job_statuses_past_the_cap_are_other_and_logged_once_a_minute_per_target(
    harness: Harness, world: AihcWorld
) -> None:
    # Every job a status of its own: 23 + 60 strings, more than the set holds.
    for n in range(60):
        world.add_job(pool=POOL, status=f"Odd-{n:02}", pods=1)
    for n, job in enumerate(world.jobs.values()):
        job.status = job.status if n % 2 else f"Strange-{n:02}"
    provider = harness.provider(metric_types=["GpuUsage"], events=False)
    with capture_logs() as logs:
        for _ in range(3):
            result = await harness.poll(provider)
    status = named(samples(result), "training_job_status")
    states = {labels(s)["status"] for s in status}
    assert len(states) == MAX_STATES and "other" in states
    assert set(KNOWN_JOB_STATUSES) <= states
    # Every job still has its 1: its own status, or `other`.
    ones = Counter(labels(s)["job_id"] for s in status if s.value == 1)
    assert set(ones.values()) == {1} and len(ones) == len(world.jobs)
    lines = [e for e in logs if e["event"] == FOLDED]
    assert [(e["label"], e["cap"], e["target"]) for e in lines] == [
        ("status", MAX_STATES, "aihc-test")
    ]
    assert lines[0]["folded"] == 1 and len(lines[0]["values"]) == 1


@jobs(3)
async def test_event_reasons_and_types_summed_as_other_are_logged_once_a_minute_per_target(
    harness: Harness, world: AihcWorld
) -> None:
    """Three jobs, each past the cap, over three polls."""
    event = {"count": 1, "lastTimestamp": "2026-01-01T00:00:00Z"}
    many = MAX_EVENT_REASONS + 2
    for job in world.jobs.values():
        job.event_items = [
            {**event, "type": "Warning" if n else "Odd", "reason": f"reason-{n:02}"}
            for n in range(many)
        ]
    provider = harness.provider(metric_types=["GpuUsage"])
    with capture_logs() as logs:
        for _ in range(3):
            result = await harness.poll(provider)
    events = named(samples(result), "training_job_events_total")
    assert {labels(s)["event_type"] for s in events} == {"Warning", "other"}
    assert "other" in {labels(s)["reason"] for s in events}
    lines = [e for e in logs if e["event"] == FOLDED]
    # One line per label for the 3 jobs and 3 polls, not one per job and change.
    assert sorted((e["label"], e["folded"]) for e in lines) == [
        ("event_type", 1),
        ("reason", 1),
    ]
