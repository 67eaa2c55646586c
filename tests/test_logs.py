"""The redactor masks secrets wherever they appear in a log event."""

from __future__ import annotations

import io
import json
import logging

from exporter.logs import NEW_AFTER, LogThrottle, OnChange, configure_logging, get_logger
from exporter.redaction import REDACTED, Redactor, redactor


def test_masks_keys_values_and_shapes() -> None:
    r = Redactor(["sk-0123456789"])
    event = r(
        None,
        "info",
        {
            "event": "calling with sk-0123456789 inside",
            "secret_access_key": "whatever",
            "headers": {"Authorization": "bce-auth-v1/ak/2024/1800//abc", "Host": "x"},
            "detail": "Authorization: Bearer tok-123 and "
            "bce-auth-v1/AK/2024-01-01T00:00:00Z/1800//f00",
            "api_key": "k",
            "password": "p",
            "count": 3,
        },
    )
    assert event["event"] == f"calling with {REDACTED} inside"
    assert event["secret_access_key"] == REDACTED
    assert event["headers"] == {"Authorization": REDACTED, "Host": "x"}
    assert "tok-123" not in event["detail"] and "f00" not in event["detail"]
    assert event["api_key"] == event["password"] == REDACTED
    assert event["count"] == 3


def test_structlog_and_stdlib_lines_are_redacted() -> None:
    stream = io.StringIO()
    configure_logging("info", "json", stream=stream)
    redactor.add(["the-configured-secret"])
    get_logger("t").info("boom", url="http://x/?k=the-configured-secret")
    logging.getLogger("aiohttp.client").warning("Authorization: Bearer the-configured-secret")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert len(lines) == 2
    assert "the-configured-secret" not in stream.getvalue()
    assert lines[0]["event"] == "boom" and lines[0]["level"] == "info"


def test_on_change_answers_once_per_change_per_key() -> None:
    states: OnChange[str | None] = OnChange(None)
    # The initial state is no change: a list that was never failing logs nothing.
    assert not states.changed(None, "q-a")
    assert [states.changed("page 3 repeats", "q-a") for _ in range(3)] == [True, False, False]
    # Another key keeps its own state.
    assert states.changed("page 2 repeats", "q-b") and states.last("q-a") == "page 3 repeats"
    assert states.changed("more than 5 pages", "q-a")
    assert states.changed(None, "q-a") and not states.changed(None, "q-a")
    assert states.last("q-a") is None and states.last("q-c") is None


def test_a_kind_that_goes_on_is_said_less_and_less_and_starts_over_after_a_quiet_interval() -> None:
    now = [0.0]
    throttle = LogThrottle(60.0, clock=lambda: now[0])
    said = []
    # An hour-long outage failing a call every 10 s.
    for t in range(0, 3600, 10):
        now[0] = float(t)
        if throttle.allow("list 503") is not None:
            said.append(t)
    assert said == [0, 60, 180, 420, 900, 1860]
    # Away for a while, then back: a new condition, said at once.
    now[0] = 3600.0 + NEW_AFTER * 60
    assert throttle.allow("list 503") == 173
    now[0] += 30
    assert throttle.allow("list 503") is None


def test_a_kind_that_comes_more_than_an_interval_apart_is_said_less_and_less_too() -> None:
    # A call failing every 90 s (a slower tier's item): not a line for each of them.
    now = [0.0]
    throttle = LogThrottle(60.0, clock=lambda: now[0])
    said = 0
    for t in range(0, 1800, 90):
        now[0] = float(t)
        said += throttle.allow("DescribeJob 500") is not None
    assert said == 5
