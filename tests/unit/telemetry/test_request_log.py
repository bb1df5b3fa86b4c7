"""Request ids, the access line's figures, and JSON log lines."""

from __future__ import annotations

import json
import logging

from flask.testing import FlaskClient

from app.telemetry.request_log import JsonFormatter
from app.telemetry.request_stats import RequestStats


def test_request_id_is_honoured_or_made(client: FlaskClient) -> None:
    assert client.get("/health", headers={"X-Request-ID": "abc-123"}).headers["X-Request-ID"] == "abc-123"
    made = client.get("/health").headers["X-Request-ID"]
    assert len(made) == 32
    # Ids that could forge log lines are replaced.
    assert client.get("/health", headers={"X-Request-ID": "a b\tc"}).headers["X-Request-ID"] != "a b\tc"
    assert client.get("/nope").headers["X-Request-ID"]  # errors too


def test_stats_count_the_most_tokens_each_choice_reported() -> None:
    stats = RequestStats()
    stats.count_tokens(0, 3)
    stats.count_tokens(1, 2)
    stats.count_tokens(0, 1)  # a stale running count never lowers the total
    assert stats.completion_tokens == 5


def test_stats_time_the_first_text_then_the_gaps() -> None:
    stats = RequestStats()
    stats.on_text()
    stats.on_text()
    stats.on_text()
    assert stats.ttft is not None and stats.ttft >= 0 and len(stats.gaps) == 2


def test_json_formatter_puts_the_access_fields_on_the_line() -> None:
    record = logging.LogRecord("app.access", logging.INFO, __file__, 1, "GET /x", None, None)
    record.request_id = "abc"
    record.fields = {"route": "/x", "status": 200}
    line = json.loads(JsonFormatter().format(record))
    assert line["request_id"] == "abc" and line["route"] == "/x" and line["status"] == 200
    assert line["message"] == "GET /x" and line["logger"] == "app.access"
