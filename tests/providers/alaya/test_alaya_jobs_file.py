"""`jobs_file` through the whole exporter: edits in place, atomic replaces, broken and missing
files, while it polls the simulator on its own every 0.2 s."""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from exporter.config import ConfigError, Settings
from exporter.providers.alaya import AlayaJob
from exporter.providers.alaya.jobsfile import MAX_FILE_BYTES, MAX_JOBS, JobsDocument, parse_jobs
from exporter.server import build_app
from exporter.simulator import Simulator, running
from exporter.simulator.alaya import AlayaWorld

from .alaya_helpers import T0, Running, log_events, make_target, pods_of

ERRORS = "training_exporter_discovery_errors_total"
NOT_USED = "alaya jobs file not used; the last good list is kept"


@pytest.fixture
def small_world() -> AlayaWorld:
    return AlayaWorld(seed=13, job_count=3, pods_per_job=2, cards_per_pod=1, clock=lambda: T0)


@pytest.fixture
async def sim_url(small_world: AlayaWorld) -> AsyncIterator[str]:
    async with running(Simulator(seed=13, alaya=small_world)) as served:
        yield served.url


@pytest.fixture
def start(
    aiohttp_client: Callable[..., Any], sim_url: str, small_world: AlayaWorld
) -> Callable[..., Any]:
    async def make(**overrides: Any) -> Running:
        # One call per pod keeps a 0.2 s poll cheap.
        fields: dict[str, Any] = {"jobs": [], "types": ["cpu"], "pod_details": False}
        target = make_target(sim_url, small_world, **{**fields, **overrides})
        client = await aiohttp_client(build_app(Settings(alaya=[target], poll_interval=0.2)))
        return Running(client, target.name)

    return make


def write_jobs(
    path: Path,
    jobs: dict[str, list[str]],
    *,
    as_json: bool = False,
    shape: Literal["mapping", "list"] = "mapping",
) -> None:
    """The jobs as `{jobs: [...]}`, or as the plain list (`shape="list"`), in YAML or JSON."""
    entries = [{"id": job_id, "pods": pods} for job_id, pods in jobs.items()]
    if as_json:
        document: Any = entries if shape == "list" else {"jobs": entries}
        path.write_text(json.dumps(document), encoding="utf-8")
    else:
        indent = "" if shape == "list" else "  "
        lines = [] if shape == "list" else ["jobs:"]
        lines += [f"{indent}- id: {e['id']}\n{indent}  pods: {e['pods']}" for e in entries]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def replace_atomically(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


@pytest.mark.parametrize("shape", ["mapping", "list"])
async def test_series_follow_each_edit_and_a_broken_file_keeps_the_last_list(
    start: Callable[..., Any],
    small_world: AlayaWorld,
    tmp_path: Path,
    json_logs: io.StringIO,
    shape: Literal["mapping", "list"],
) -> None:
    """`{jobs: [...]}` or the plain list of Prometheus' file_sd files: followed alike."""
    a, b, c = small_world.jobs
    path = tmp_path / "jobs.yaml"
    write_jobs(path, {a: ["worker-0"]}, shape=shape)
    rig = await start(jobs_file=path)

    assert pods_of(await rig.next_full_poll()) == {(a, "worker-0")}

    # Edited in place: same inode, new size and mtime.
    write_jobs(path, {a: ["worker-0", "worker-1"], b: ["worker-0"]}, shape=shape)
    assert pods_of(await rig.next_full_poll()) == {
        (a, "worker-0"),
        (a, "worker-1"),
        (b, "worker-0"),
    }

    # Replaced atomically: a new inode renamed over the old one. A and B go, every series.
    scratch = tmp_path / "scratch.yaml"
    write_jobs(scratch, {c: ["worker-1"]}, as_json=True, shape=shape)
    replace_atomically(path, scratch.read_text(encoding="utf-8"))
    series = await rig.next_full_poll()
    assert pods_of(series) == {(c, "worker-1")}
    assert not any(
        dict(k)["job_id"] in (a, b) for v in series.values() for k in v if "job_id" in dict(k)
    )
    assert rig.count(ERRORS, series) == 0

    # Broken YAML: the last list stays, each poll counts, one log line.
    replace_atomically(path, "jobs:\n  - id: x\n  pods: [\n")
    series = await rig.next_full_poll()
    assert pods_of(series) == {(c, "worker-1")}
    first = rig.count(ERRORS, series)
    assert first >= 1
    series = await rig.next_full_poll()
    assert rig.count(ERRORS, series) >= first + 1
    assert rig.value(series, "training_exporter_up", target=rig.target) == 1
    [broken] = log_events(json_logs, NOT_USED)
    assert broken["level"] == "warning" and broken["jobs_kept"] == 1
    [problem] = broken["problems"]
    assert problem.startswith(f"jobs_file: invalid YAML in {path} at line"), problem

    # Valid YAML, invalid jobs: one line per key, as the configuration's are.
    replace_atomically(
        path,
        json.dumps({"jobs": [{"id": b, "pods": []}, {"id": c, "pods": ["w"], "owner": "me"}]}),
    )
    assert pods_of(await rig.next_full_poll()) == {(c, "worker-1")}
    invalid = log_events(json_logs, NOT_USED)[1]
    assert invalid["problems"] == [
        "jobs[0].pods: List should have at least 1 item after validation, not 0",
        "jobs[1].owner: unknown key",
    ]

    # Gone: still the last list, logged once more with the new reason.
    path.unlink()
    await rig.next_full_poll()
    series = await rig.next_full_poll()
    assert pods_of(series) == {(c, "worker-1")}
    events = log_events(json_logs, NOT_USED)
    assert len(events) == 3
    assert events[2]["problems"] == [f"jobs_file: file not found: {path}"]

    # Back: the new list, from the next poll.
    write_jobs(path, {b: ["worker-1"]})
    series = await rig.next_full_poll()
    assert pods_of(series) == {(b, "worker-1")}
    errors = rig.count(ERRORS, series)
    assert rig.count(ERRORS, await rig.next_full_poll()) == errors
    assert len(log_events(json_logs, NOT_USED)) == 3
    assert log_events(json_logs, "alaya jobs file read")[-1]["jobs"] == 1


async def test_jobs_and_jobs_file_together_are_their_union(
    start: Callable[..., Any], small_world: AlayaWorld, tmp_path: Path
) -> None:
    a, b, _ = small_world.jobs
    path = tmp_path / "jobs.json"
    write_jobs(path, {a: ["worker-1"], b: ["worker-0"]}, as_json=True)
    rig = await start(jobs=[AlayaJob(id=a, pods=["worker-0"])], jobs_file=path)
    series = await rig.next_full_poll()
    assert pods_of(series) == {(a, "worker-0"), (a, "worker-1"), (b, "worker-0")}
    landing = await rig.landing()
    assert "configured + jobs file" in landing and str(path) in landing


async def test_a_file_missing_at_start_does_not_stop_the_exporter(
    start: Callable[..., Any], small_world: AlayaWorld, tmp_path: Path
) -> None:
    a = next(iter(small_world.jobs))
    path = tmp_path / "later.yaml"
    rig = await start(jobs_file=path)
    series = await rig.next_full_poll()
    assert pods_of(series) == set()
    assert rig.value(series, "training_exporter_up", target=rig.target) == 1
    assert rig.count(ERRORS, series) >= 1
    write_jobs(path, {a: ["worker-0"]})
    assert pods_of(await rig.next_full_poll()) == {(a, "worker-0")}


def test_size_and_list_lengths_are_bounded(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text("jobs: []\n" + "#" * MAX_FILE_BYTES, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        parse_jobs(path, path.stat().st_size)
    assert caught.value.problems == [
        f"config: {path} is {MAX_FILE_BYTES + 9} bytes, more than {MAX_FILE_BYTES}"
    ]

    # (Validated without the file: PyYAML takes 1.6 s to read 10,001 jobs.)
    many = [{"id": str(i), "pods": ["w"]} for i in range(MAX_JOBS + 1)]
    with pytest.raises(ValidationError) as invalid:
        JobsDocument.model_validate({"jobs": many})
    assert [e["loc"] for e in invalid.value.errors()] == [("jobs",)]

    path.write_text(json.dumps({"jobs": [{"id": "j", "pods": ["w"] * 1025}]}), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        parse_jobs(path, path.stat().st_size)
    assert caught.value.problems[0].startswith("jobs[0].pods: List should have at most 1024")

    path.write_text("- id: j\n  pods: []\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        parse_jobs(path, path.stat().st_size)
    assert caught.value.problems == [
        "[0].pods: List should have at least 1 item after validation, not 0"
    ]

    path.write_text("just some text\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        parse_jobs(path, path.stat().st_size)
    assert caught.value.problems == [
        f"config: {path} must hold a list of jobs or a mapping, not a str"
    ]


def test_a_plain_list_reads_as_the_mapping_does(tmp_path: Path) -> None:
    listed, mapped = tmp_path / "list.yaml", tmp_path / "mapping.yaml"
    listed.write_text("- {id: job-a, pods: [worker-0]}\n- id: job-b\n  pods: [w0, w1]\n")
    write_jobs(mapped, {"job-a": ["worker-0"], "job-b": ["w0", "w1"]})
    jobs = parse_jobs(listed, listed.stat().st_size)
    assert jobs == parse_jobs(mapped, mapped.stat().st_size)
    assert [(j.id, j.pods) for j in jobs] == [("job-a", ["worker-0"]), ("job-b", ["w0", "w1"])]
    listed.write_text("[]\n")
    assert parse_jobs(listed, listed.stat().st_size) == ()


async def test_a_file_may_turn_from_one_shape_to_the_other(
    start: Callable[..., Any], small_world: AlayaWorld, tmp_path: Path, json_logs: io.StringIO
) -> None:
    a, b, _ = small_world.jobs
    path = tmp_path / "jobs.yaml"
    write_jobs(path, {a: ["worker-0"]}, shape="list")
    rig = await start(jobs_file=path)
    assert pods_of(await rig.next_full_poll()) == {(a, "worker-0")}
    write_jobs(path, {b: ["worker-0"]}, as_json=True)
    assert pods_of(await rig.next_full_poll()) == {(b, "worker-0")}
    write_jobs(path, {a: ["worker-1"]}, shape="list", as_json=True)
    series = await rig.next_full_poll()
    assert pods_of(series) == {(a, "worker-1")}
    assert rig.count(ERRORS, series) == 0

    # A bad entry of a plain list is named by its index alone.
    path.write_text(f"- id: {b}\n  pods: []\n", encoding="utf-8")
    assert pods_of(await rig.next_full_poll()) == {(a, "worker-1")}
    [refused] = log_events(json_logs, NOT_USED)
    assert refused["problems"] == [
        "[0].pods: List should have at least 1 item after validation, not 0"
    ]
