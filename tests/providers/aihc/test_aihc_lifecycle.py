"""A job's life on AIHC: the failure classifier over every event example of the events page
and a planted case of each class, the rules table of docs/metrics.md, and the lifecycle
series the real provider exports from the simulated lifecycle world over HTTP."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

import pytest
from structlog.testing import capture_logs

from exporter.providers.aihc import models
from exporter.providers.aihc.lifecycle import FAILURE_LOOKBACK, RULES, gpus_in_spec
from exporter.providers.kit.failures import CLASSES, Classifier, Evidence, Rule
from exporter.simulator import lifecycle as sim
from exporter.simulator.aihc import AihcWorld
from exporter.simulator.aihc_jobs import rfc3339
from tests.conftest import REPO
from tests.providers.aihc.aihc_helpers import POOL, Harness, jobs, labels, named, samples

FIXTURES = REPO / "tests" / "providers" / "aihc" / "fixtures"
CLASSIFIER = Classifier(RULES)
# The events page's example, one event at a time: the class it alone points at.
PAGE_EXAMPLE = {
    "JobTerminated": "unknown",
    "SuccessfulDeletePodGroup": "unknown",
    "ExitedWithCode": "user_exit",
    "FailedToStartFaultTolerance": "hardware",
    "JobFailed": "unknown",
    "Error": "user_exit",
    "SuccessfulCreateService": "unknown",
    "SuccessfulCreatePod": "unknown",
}


def page_events() -> list[models.Event]:
    reply = models.parse_job_events((FIXTURES / "job_events.json").read_bytes())
    return list(reply.events or [])


def evidence(events: list[models.Event]) -> list[Evidence]:
    return [Evidence(e.reason, e.message, e.type == "Warning") for e in events]


def test_every_event_example_of_the_events_page_is_classified() -> None:
    events = page_events()
    assert sorted(e.reason for e in events) == sorted(PAGE_EXAMPLE)
    for event in events:
        verdict = CLASSIFIER.classify(evidence([event]))
        assert verdict.failure_class == PAGE_EXAMPLE[event.reason], event.reason
    # The page's failed job as a whole: fault tolerance could not start on unhealthy nodes,
    # a cause before the master's exit code 1.
    assert CLASSIFIER.classify(evidence(events)).failure_class == "hardware"


def _sim_job(world: AihcWorld) -> Any:
    return world.add_job(pool=POOL, pods=2, name="job")


@pytest.mark.parametrize("failure_class", sim.FAILURE_CLASSES)
def test_each_planted_failure_is_classified_as_planted(failure_class: str) -> None:
    world = AihcWorld.fixed(seed=5, pools={POOL: ["default"]})
    events, pod_reason = sim.failure_events(failure_class, _sim_job(world), 1.7e9)
    found = [Evidence(e["reason"], e["message"], e["type"] == "Warning") for _, e in events] + (
        [Evidence(pod_reason, "", True)] if pod_reason else []
    )
    verdict = CLASSIFIER.classify(found)
    assert verdict.failure_class == failure_class
    assert (verdict.unmapped == {"UnexpectedAdmissionError"}) == (failure_class == "unknown")


def test_causes_win_over_symptoms() -> None:
    exit_137 = Evidence("ExitedWithCode", "Pod: default.w-0 exited with code 137")
    nccl = Evidence("FaultDetected", "NCCL error: unhandled system error", True)
    xid = Evidence("XidError", "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus")
    evicted = Evidence("Evicted", "The node was low on resource: memory.", True)
    assert CLASSIFIER.classify([exit_137, nccl]).failure_class == "oom"
    assert CLASSIFIER.classify([exit_137, evicted]).failure_class == "preempted"
    assert CLASSIFIER.classify([nccl, xid]).failure_class == "hardware"
    scheduled_late = Evidence("FailedScheduling", "0/16 nodes are available", True)
    exit_1 = Evidence("ExitedWithCode", "Pod: default.w-0 exited with code 1")
    assert CLASSIFIER.classify([scheduled_late, exit_1]).failure_class == "user_exit"
    assert CLASSIFIER.classify(
        [Evidence("ExitedWithCode", "exited with code 0")]
    ).failure_class == ("unknown")


def test_rules_point_only_at_the_closed_set() -> None:
    assert {r.failure_class for r in RULES} == set(CLASSES) - {"unknown"}
    with pytest.raises(ValueError):
        Rule("disk_full", "x", None, "inferred", "")
    with pytest.raises(ValueError):
        Rule("oom", None, None, "inferred", "")


def _cells(line: str) -> list[str]:
    """A markdown table row's cells, `\\|` kept inside its cell."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_docs_carry_the_rules_table_row_for_row() -> None:
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text.split("### Failure classes", 1)[1].split("\n## ", 1)[0]
    rows = [
        _cells(line)
        for line in section.splitlines()
        if line.startswith("| `") and len(_cells(line)) == 5
    ]

    def pattern(cell: str) -> str | None:
        return None if cell == "any" else cell.strip("`")

    documented = [(c.strip("`"), pattern(r), pattern(m), p) for c, r, m, p, _ in rows]
    assert documented == [(r.failure_class, r.reason, r.message, r.provenance) for r in RULES]
    for name in CLASSES:
        assert f"| `{name}` |" in section, name


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ([{"name": "baidu.com/a800_80g_cgpu", "quantity": 1}], 1.0),
        ([{"name": "baidu.com/h800_80g_cgpu", "quantity": "2"}], 2.0),
        ([{"name": "nvidia.com/gpu", "quantity": 4}, {"name": "cpu", "quantity": 32}], 4.0),
        ([{"name": "sharedMemory", "quantity": 10}], None),
        ([], None),
        ([{"name": "nvidia.com/gpu", "quantity": "lots"}], None),
        ("not a list", None),
    ],
)
def test_gpus_per_pod_come_from_the_spec_s_gpu_resources(resources: Any, expected: Any) -> None:
    body = {"jobs": [{"jobId": "j", "jobSpec": {"resources": resources}}], "totalCount": 1}
    (job,) = models.parse_describe_jobs(json.dumps(body).encode()).jobs or []
    assert gpus_in_spec(job) == expected


async def _lifecycle_poll(harness: Harness, polls: int = 2, **target: Any) -> Any:
    provider = harness.provider(**target)
    result = None
    for _ in range(polls):
        result = await harness.poll(provider)
    return result


def _values(result: Any, name: str) -> dict[str, tuple[dict[str, str], float]]:
    return {labels(s)["job_id"]: (labels(s), s.value) for s in named(samples(result), name)}


@pytest.fixture
def planted(world: AihcWorld) -> dict[str, list[str]]:
    """The lifecycle world in POOL's queues, its planted failures already failed (with a test's
    `jobs(0)`, nothing else)."""
    world.pools[POOL] = list(sim.QUEUE_WAITS)
    now = world.now() - sim.PLANTED_FAIL_AFTER - 1
    sim.populate(world, seed=5, pool=POOL, now=now, hours=1)
    cases: dict[str, list[str]] = {}
    for case in sim.plant(world, seed=5, pool=POOL, now=now):
        cases.setdefault(case.case, []).append(case.job_id)
    return cases


@jobs(0)
async def test_each_planted_failure_exports_its_class_and_unknown_is_logged_once(
    harness: Harness, planted: dict[str, list[str]]
) -> None:
    provider = harness.provider()
    with capture_logs() as logs:
        for _ in range(3):
            result = await harness.poll(provider)
    classes = {
        j: lab["class"] for j, (lab, _) in _values(result, "training_job_failure_class").items()
    }
    for case in sim.FAILURE_CLASSES:
        for job_id in planted[case]:
            assert classes[job_id] == case, (case, job_id)
    every_planted = {j for jobs in planted.values() for j in jobs}
    background = {j for j in classes if j not in every_planted}
    assert {classes[j] for j in background} <= {"user_exit"}
    unmapped = [e for e in logs if "reasons" in e and e.get("event", "").startswith("failed job")]
    assert [(e["job_id"], e["reasons"]) for e in unmapped] == [
        (planted["unknown"][0], ["UnexpectedAdmissionError"])
    ]


@jobs(0)
async def test_waits_starts_restarts_and_gpus_of_the_lifecycle_world(
    harness: Harness, world: AihcWorld, planted: dict[str, list[str]]
) -> None:
    result = await _lifecycle_poll(harness, gpus_per_pod=3)
    waits = _values(result, "training_job_queue_wait_seconds")
    started = _values(result, "training_job_started_timestamp_seconds")
    now = world.now()
    (pending,) = planted["pending"]
    job = world.jobs[pending]
    assert pending not in started
    # Waited until the last list, a little before now (two rounds take seconds when loaded),
    # from createdAt as the reply gives it: in whole seconds.
    assert 0 <= now - math.floor(job.created_at) - waits[pending][1] < 60
    for job_id, (_, value) in started.items():
        sim_job = world.jobs[job_id]
        assert value == pytest.approx(sim_job.running_since(now), abs=1), job_id
        assert waits[job_id][1] == pytest.approx(value - sim_job.created_at, abs=1)
    for case in sim.BEFORE_RUNNING:
        (job_id,) = planted[case]
        assert job_id not in waits and job_id not in started
    (loop,) = planted["restart-loop"]
    restarting = _values(result, "training_job_restarting_seconds")
    # An hour of a minute in Restarting every six: ten minutes, give or take a restart.
    assert 9 * 60 <= restarting[loop][1] <= 11 * 60
    gpus = _values(result, "training_job_gpus_per_pod")
    for job_id, (lab, value) in gpus.items():
        spec = world.jobs[job_id].gpus
        assert (lab["source"], value) == (("setting", 3.0) if spec is None else ("spec", spec))


@jobs(2)
async def test_a_failure_older_than_the_lookback_gets_no_reads(
    harness: Harness, world: AihcWorld
) -> None:
    """Two running jobs beside the two failed ones."""
    old = world.add_job(pool=POOL, status="Failed", finished_at=rfc3339(world.now() - 2 * 86400))
    recent = world.add_job(pool=POOL, status="Failed", finished_at=rfc3339(world.now() - 600))
    assert FAILURE_LOOKBACK == 86400
    await _lifecycle_poll(harness, polls=2)
    read = Counter(e.subject[0] for e in harness.simulator.log.entries if e.subject[0])
    assert read[old.job_id] == 0 and read[recent.job_id] == 2
