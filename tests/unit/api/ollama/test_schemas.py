"""Ollama's request fields as its clients write them: keep_alive durations, format, think, options."""

from __future__ import annotations

import pytest
from marshmallow import ValidationError

from app.api.ollama.schemas import FormatField, KeepAliveField, OllamaOptionsSchema, ThinkField


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("5m", 300.0), ("1h30m", 5400.0), ("300ms", 0.3), ("-1", -1.0), ("-1m", -60.0), (0, 0.0), (90, 90.0),
     ("45", 45.0), ("2.5s", 2.5)],
)  # fmt: skip
def test_keep_alive_is_read_as_seconds(given: object, seconds: float) -> None:
    assert KeepAliveField().deserialize(given) == pytest.approx(seconds)


@pytest.mark.parametrize("given", ["soon", "5 minutes", "m", True, [], "5x"])
def test_a_keep_alive_that_is_no_duration_is_refused(given: object) -> None:
    with pytest.raises(ValidationError):
        KeepAliveField().deserialize(given)


def test_format_and_think_take_ollamas_forms_only() -> None:
    assert FormatField().deserialize("json") == "json" and FormatField().deserialize({"type": "object"})
    assert ThinkField().deserialize(True) is True and ThinkField().deserialize("high") == "high"
    for bad_format in ("xml", 3, ["json"]):
        with pytest.raises(ValidationError):
            FormatField().deserialize(bad_format)
    with pytest.raises(ValidationError):
        ThinkField().deserialize("very")


def test_options_are_bounded_and_num_predict_0_is_refused() -> None:
    schema = OllamaOptionsSchema()
    assert schema.load({"num_predict": -1, "num_ctx": 2048, "temperature": 0.2, "num_gpu": 99}) == {
        "num_predict": -1,
        "num_ctx": 2048,
        "temperature": 0.2,
    }  # fmt: skip  (load-time options such as num_gpu are the server's)
    for bad in ({"num_predict": 0}, {"num_predict": -3}, {"temperature": "hot"}, {"num_ctx": 0}):
        with pytest.raises(ValidationError):
            schema.load(bad)
