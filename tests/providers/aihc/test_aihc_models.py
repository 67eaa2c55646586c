"""The reply models and the mapping, on the provider pages' real example replies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from exporter.metrics import KNOWN_JOB_STATUSES, KNOWN_POD_PHASES, SPEC_BY_NAME
from exporter.providers.aihc import mapping, models
from exporter.providers.aihc.mapping import JobIdentity

FIXTURES = Path(__file__).parent / "fixtures"
WHO = JobIdentity("cce-cm1jjxrq", "default", "job-e5MZV1Yxw1su")


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def raw(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False).encode()


class Drops(list[str]):
    def __call__(self, reason: str) -> None:
        self.append(reason)


def test_describe_jobs_example_parses_and_maps() -> None:
    reply = models.parse_describe_jobs(raw(fixture("describe_jobs.json")))
    assert reply.total_count == 3 and reply.jobs is not None and len(reply.jobs) == 3
    scheduled, succeeded, _ = reply.jobs
    drops = Drops()
    samples = mapping.job_samples(scheduled, WHO, KNOWN_JOB_STATUSES, drops)
    by_name: dict[str, list[Any]] = {}
    for s in samples:
        by_name.setdefault(s.name, []).append(s)
        assert s.name in SPEC_BY_NAME and s.label_names == SPEC_BY_NAME[s.name].labels
    info = dict(
        zip(
            by_name["training_job_info"][0].label_names,
            by_name["training_job_info"][0].label_values,
            strict=True,
        )
    )
    assert info["job_name"] == "test-training-job-0513" and info["image"].startswith("registry")
    current = [s.label_values[-1] for s in by_name["training_job_status"] if s.value == 1]
    assert current == ["Scheduled"]
    assert len(by_name["training_job_status"]) == len(KNOWN_JOB_STATUSES)
    assert by_name["training_job_created_timestamp_seconds"][0].value == 1747102731.0
    # finishedAt "" while it runs: no series at all.
    assert "training_job_finished_timestamp_seconds" not in by_name
    assert by_name["training_job_replicas"][0].value == 2
    finished = mapping.job_samples(succeeded, WHO, KNOWN_JOB_STATUSES, drops)
    assert [s.value for s in finished if s.name.startswith("training_job_finished")] == [
        1747054684.0
    ]
    assert drops == []


@pytest.mark.parametrize("shape", ["top", "nested"])
def test_describe_job_accepts_both_documented_shapes(shape: str) -> None:
    example = fixture("describe_job.json")
    nested = {"requestId": example.pop("requestId"), "job": dict(example)}
    detail = models.parse_describe_job(raw(nested if shape == "nested" else example))
    assert detail.job_id == "job-e5MZV1Yxw1su" and detail.pods is not None
    assert [(p.name, p.pod_ip, p.node_name) for p in detail.pods] == [
        ("test-training-job-0513-3-worker-0", "10.15.50.82", "192.168.12.157"),
        ("test-training-job-0513-3-master-0", "10.15.50.6", "192.168.12.157"),
    ]
    samples = mapping.pod_samples(detail.pods, WHO, KNOWN_POD_PHASES, Drops())
    restarts = [s.value for s in samples if s.name == "training_pod_restarts"]
    assert restarts == [0.0, 0.0]
    running = [s for s in samples if s.name == "training_pod_phase" and s.value == 1]
    assert {s.label_values[-1] for s in running} == {"Running"}


def test_nested_shape_with_pods_beside_the_job_still_finds_them() -> None:
    example = fixture("describe_job.json")
    pods = example.pop("pods")
    detail = models.parse_describe_job(raw({"requestId": "r", "job": example, "pods": pods}))
    assert detail.pods is not None and len(detail.pods) == 2


def test_no_secret_bearing_field_survives_the_models() -> None:
    detail = models.parse_describe_job(raw(fixture("describe_job.json")))
    dumped = json.dumps(detail.model_dump(by_alias=True), ensure_ascii=False)
    for word in (
        "imageConfig",
        "password",
        "envs",
        "command",
        "labels",
        "NCCL_DEBUG",
        "sleep 1d",
        "ai-user-name",
    ):
        assert word not in dumped


def test_metrics_example_parses() -> None:
    reply = models.parse_describe_job_metrics(raw(fixture("describe_job_metrics.json")))
    assert reply.metrics is not None
    assert [
        (s.pod_name, s.metrics[0].time, s.metrics[0].value) for s in reply.metrics if s.metrics
    ] == [
        ("job-0hy1pdtr3r7y-master-0", 1758628017, "0.005723205764186557"),
        ("job-0hy1pdtr3r7y-worker-0", 1758628017, "0.005319009570690938"),
    ]


def test_events_example_sums_counts_and_keeps_the_newest_timestamp() -> None:
    reply = models.parse_job_events(raw(fixture("job_events.json")))
    samples = mapping.event_samples(reply.events or [], WHO, Drops())
    totals = {
        s.label_values[-2:]: s.value for s in samples if s.name == "training_job_events_total"
    }
    assert totals[("Normal", "JobTerminated")] == 4
    assert totals[("Warning", "Error")] == 1
    assert sum(totals.values()) == 4 + 4 + 2 + 1 + 1 + 1 + 1 + 1
    newest = {
        s.label_values[-2:]: s.value
        for s in samples
        if s.name == "training_job_last_event_timestamp_seconds"
    }
    # 2024-07-15 16:52:50 +0000 UTC
    assert newest[("Normal", "ExitedWithCode")] == 1721062370.0
    assert newest[("Normal", "SuccessfulCreatePod")] == 1721047624.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-07-15 16:52:50 +0000 UTC", 1721062370.0),
        ("2024-07-15 16:52:50.5 +0000 UTC", 1721062370.5),
        ("2024-07-16 00:52:50 +0800 CST", 1721062370.0),
        ("2024-07-15 16:52:50 +0000 UTC m=+0.000123", 1721062370.0),
        ("2024-07-15T16:52:50Z", 1721062370.0),
        ("yesterday", None),
        ("", None),
    ],
)
def test_event_time_formats(text: str, expected: float | None) -> None:
    assert mapping.parse_event_time(text) == expected


@pytest.mark.parametrize(
    ("raw_value", "value", "reason"),
    [
        ("87.5", 87.5, None),
        (" 1e3 ", 1000.0, None),
        (0.25, 0.25, None),
        (7, 7.0, None),
        ("", None, "unparsable"),
        ("abc", None, "unparsable"),
        ("1_0", None, "unparsable"),
        (None, None, "unparsable"),
        (True, None, "unparsable"),
        ("NaN", None, "not_finite"),
        ("-Inf", None, "not_finite"),
        ("1e999", None, "not_finite"),
        (float("inf"), None, "not_finite"),
        (10**400, None, "not_finite"),
        # float() takes non-ASCII digits; upstream's decimals are ASCII.
        ("١٢", None, "unparsable"),
    ],
)
def test_values_parse_or_say_why_not(
    raw_value: models.RawNumber, value: float | None, reason: str | None
) -> None:
    assert mapping.parse_number(raw_value) == (value, reason)


@pytest.mark.parametrize(
    "body",
    [
        b'{"requestId": "r", "totalCount": 3, "jobs": [{"jobId": "a", "na',
        b'{"requestId": 42, "jobs": "nope", "totalCount": "many"}',
        b"[1, 2]",
        b"<html>502</html>",
    ],
)
def test_malformed_job_lists_are_reply_errors(body: bytes) -> None:
    with pytest.raises(models.ReplyError) as caught:
        models.parse_describe_jobs(body)
    assert "nope" not in str(caught.value) and "many" not in str(caught.value)


@pytest.mark.parametrize(
    ("parse", "body"),
    [
        (models.parse_describe_job_metrics, b'{"metrics": {"a": 1}}'),
        (models.parse_job_events, b'{"events": 7}'),
        (models.parse_describe_job, b'{"status": "ok", "data": [1, 2]}'),
    ],
)
def test_other_malformed_replies_are_reply_errors(parse: Any, body: bytes) -> None:
    with pytest.raises(models.ReplyError):
        parse(body)


def test_an_element_that_does_not_fit_is_dropped_alone_and_counted() -> None:
    jobs = models.parse_describe_jobs(
        b'{"jobs": [{"name": "no id"}, {"jobId": "a", "jobSpec": {"image": {"a": 1}}},'
        b' {"jobId": "b"}, 7]}'
    )
    assert [j.job_id for j in jobs.jobs or []] == ["b"]
    assert jobs.dropped == {"invalid_item": 3}
    detail = models.parse_describe_job(b'{"jobId": "j", "pods": [{"name": ""}, {"name": "p"}]}')
    assert [p.name for p in detail.pods or []] == ["p"] and detail.dropped == {"invalid_item": 1}
    # Nested lists count once each: the failed whole-list attempt is not counted.
    metrics = models.parse_describe_job_metrics(
        b'{"metrics": [{"podName": "p", "metrics": [{"time": 1, "value": "2"}, "x",'
        b' {"value": []}]}, {"podName": ""}, {"podName": "r", "metrics": 3},'
        b' {"podName": "q", "metrics": [{"time": 1}]}]}'
    )
    assert [s.pod_name for s in metrics.metrics or []] == ["p", "q"]
    assert metrics.dropped == {"invalid_sample": 2, "invalid_series": 2}
    clean = models.parse_describe_job_metrics(b'{"metrics": [{"podName": "p", "metrics": []}]}')
    assert clean.dropped == {}


def test_nulls_and_numbers_where_strings_belong_are_tolerated() -> None:
    body = {
        "totalCount": 1,
        "jobs": [{"jobId": "j", "name": None, "priority": 3, "jobSpec": None, "status": "Running"}],
    }
    reply = models.parse_describe_jobs(raw(body))
    assert reply.jobs is not None
    job = reply.jobs[0]
    assert (job.name, job.priority, job.job_spec.image) == ("", "3", "")


def test_bce_error_body() -> None:
    body = b'{"requestId": "abc-123", "code": "AccessDenied", "message": "denied"}'
    error = models.parse_error(body)
    assert error is not None and (error.request_id, error.code) == ("abc-123", "AccessDenied")
    assert models.parse_error(b"<html>") is None


def test_labels_are_valid_utf8_and_bounded() -> None:
    # Changed values keep their readable part and gain a hash of the original.
    cleaned = mapping.label("a\ud800b")
    assert cleaned.startswith("a\ufffdb~") and len(cleaned) == len("a\ufffdb~") + 12
    assert mapping.label("a\ud801b") != cleaned
    assert mapping.label(cleaned) == cleaned
    assert len(mapping.label("x" * 5000)) == mapping.MAX_LABEL_LENGTH
    assert mapping.label("x" * 5000) != mapping.label("x" * 5001)
    assert mapping.label('q"\\\n任务') == 'q"\\\n任务'


# Values a metrics reply may hold, odd ones included: every branch of `clean_metrics`.
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.text(alphabet=st.sampled_from("ab1.\udc80 "), max_size=4),
)
_ANY = st.recursive(
    _SCALAR,
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2)
    ),
    max_leaves=4,
)
_POINT = st.one_of(
    st.fixed_dictionaries({}, optional={"time": _SCALAR, "value": _SCALAR, "x": _ANY}), _ANY
)
_SERIES = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "podName": st.sampled_from(["p", "q"]) | _SCALAR | _ANY,
            "pod_name": _SCALAR,
            "metrics": st.none() | st.lists(_POINT, max_size=3) | _ANY,
        },
    ),
    _ANY,
)
_REPLY = st.fixed_dictionaries(
    {},
    optional={
        "requestId": _SCALAR | _ANY,
        "request_id": _ANY,
        "jobId": _SCALAR | _ANY,
        "job_id": _ANY,
        "metrics": st.none() | st.lists(_SERIES, max_size=4) | _ANY,
    },
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_REPLY)
@example({"metrics": [{"podName": "p", "metrics": [{"time": "1", "value": True}]}]})
@example({"metrics": [{"podName": "p", "pod_name": "q", "metrics": None}]})
@example({"metrics": [{"podName": "", "metrics": []}]})
@example({"jobId": {}, "metrics": []})
@example({"metrics": [{"podName": "p", "metrics": 3}]})
@example({"metrics": [{"podName": "p", "metrics": [[]]}]})
def test_a_metrics_reply_reads_the_same_on_the_fast_path_as_by_its_model(data: Any) -> None:
    """The fast path may decline a reply, never read it otherwise than the model would."""
    fast = models.clean_metrics(data)
    try:
        model = models.metrics_by_model(data)
    except models.ReplyError:
        assert fast is None
        return
    slow = _typed([(s.pod_name, [tuple(p) for p in s.metrics]) for s in model.metrics])
    if fast is not None:
        assert _typed([(s.pod_name, [tuple(p) for p in s.metrics]) for s in fast.metrics]) == slow
        assert fast.dropped == model.dropped == {}
    # A lone surrogate is how an invalid byte reads (`kit.decode`): its byte goes on the wire.
    body = json.dumps(data, ensure_ascii=False).encode("utf-8", "surrogateescape")
    reply = models.parse_describe_job_metrics(body)
    assert _typed([(s.pod_name, [tuple(p) for p in s.metrics]) for s in reply.metrics]) == slow
    assert reply.dropped == model.dropped


def _typed(series: list[tuple[str, list[Any]]]) -> list[Any]:
    """Values with their types: `True == 1`, and the model makes 1 of `true`."""
    return [(name, [tuple(repr(v) for v in p) for p in points]) for name, points in series]


def test_a_clean_steady_state_reply_takes_the_fast_path() -> None:
    """Without this the fast path could decline everything and the test above still pass."""
    points = [{"time": "1764790000", "value": "87.5"}, {"time": 1764790005, "value": 0.5}]
    data = {"requestId": "r", "jobId": "j", "metrics": [{"podName": "p", "metrics": points}]}
    assert models.clean_metrics(data) is not None
    assert models.clean_metrics(json.loads(raw(fixture("describe_job_metrics.json")))) is not None


def test_events_make_a_bounded_number_of_series_whatever_the_reasons() -> None:
    # A reply inventing a type and a reason per event: 2 types kept (Warning, other), at most
    # MAX_EVENT_REASONS reasons each plus `other`, every count still summed.
    events = [
        models.Event(type="Warning" if n % 2 else f"type-{n}", reason=f"reason-{n}", count=1)
        for n in range(200)
    ]
    samples = mapping.event_samples(events, WHO, Drops())
    totals = {
        s.label_values[-2:]: s.value for s in samples if s.name == "training_job_events_total"
    }
    assert {t for t, _ in totals} == {"Warning", "other"}
    for kind in ("Warning", "other"):
        reasons = [r for t, r in totals if t == kind]
        assert len(reasons) == mapping.MAX_EVENT_REASONS + 1 and "other" in reasons
    assert sum(totals.values()) == 200
