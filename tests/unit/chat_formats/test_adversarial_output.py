"""Every answer format against adversarial model output: reading stays linear in the output's length.

A model (or a prompt injection steering one) can write anything: long runs of `{`, quotes,
backslashes, tags opened and never closed, a format's own markers over and over. Each format
reads such an answer, whole and as a stream's partial text, within a bound far above what a
linear reading takes and far below what a quadratic one would (at 200 KB, a quadratic scan is
tens of billions of steps); and the stream's reader answers each growing prefix the same way.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.chat_formats.answer import AnswerReader
from app.chat_formats.base import ChatFormat, Function
from app.chat_formats.detect import FORMATS

WEATHER = Function("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}})
PIECES = (
    "{", "}", "[", "]", '"', "\\", ":", ",", "<", ">", "</", "```", "```json", "\n", " ", "a",
    '{"name": "get_weather", "arguments": {', '{"city": "', "<think>", "</think>", "<tool_call>",
    "<function=", "<parameter=", "[TOOL_CALLS]", "[ARGS]", "<|channel|>", ">>>", "<|message|>",
)  # fmt: skip
SIZE = 200_000  # characters: an answer of about 50k tokens
BOUND = 5.0  # seconds, on a slow shared machine: a linear reading takes well under one


def readers(fmt: ChatFormat) -> list[AnswerReader]:
    return [AnswerReader(fmt, (WEATHER,), thinking=True), AnswerReader(fmt, json_answer=True)]


def markers(fmt: ChatFormat) -> list[str]:
    return [m for m in fmt.markers if m] or ["<tool_call>"]


def read_all(fmt: ChatFormat, text: str) -> float:
    started = time.perf_counter()
    for reader in readers(fmt):
        reader.read(text, partial=True)
        reader.read(text, partial=False)
    return time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize(
    "shape",
    [
        "{" * SIZE,
        '"' * SIZE,
        "\\" * SIZE,
        "[" * SIZE,
        "<" * SIZE,
        '{"a": "' * (SIZE // 7),
        "```json\n{" * (SIZE // 9),
    ],
)
def test_runs_of_one_character_read_in_linear_time(name: str, shape: str) -> None:
    assert read_all(FORMATS[name], "Sure. " + shape * (SIZE // len(shape))) < BOUND, (name, shape)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_formats_own_markers_opened_and_never_closed_read_in_linear_time(name: str) -> None:
    fmt = FORMATS[name]
    for marker in markers(fmt):
        text = (marker + '{"name": "get_weather", "arguments": {"city": "') * (SIZE // (len(marker) + 50))
        assert read_all(fmt, text) < BOUND, (name, marker)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(FORMATS)), st.lists(st.sampled_from(PIECES), min_size=1, max_size=12))
def test_any_mixture_of_markup_repeated_reads_in_linear_time(name: str, pieces: list[str]) -> None:
    unit = "".join(pieces)
    text = unit * (SIZE // 4 // len(unit) + 1)  # a quarter size: sixty mixtures in the unit tier's minute
    assert read_all(FORMATS[name], text) < BOUND / 4, (name, unit)
