"""Function calling: when tools apply, how they are described, and parsing calls back out of text."""

from __future__ import annotations

import json

import pytest

from app.api.common import tools

WEATHER = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
TIME = {"type": "function", "function": {"name": "time"}}


@pytest.mark.parametrize(
    ("body", "active", "forced"),
    [
        ({}, False, False),
        ({"tools": [WEATHER]}, True, False),
        ({"tools": [WEATHER], "tool_choice": "auto"}, True, False),
        ({"tools": [WEATHER], "tool_choice": "none"}, False, False),
        ({"tools": [WEATHER], "tool_choice": "required"}, True, True),
        ({"tools": [WEATHER], "tool_choice": {"name": "weather"}}, True, True),
        ({"tools": [], "tool_choice": "required"}, False, False),
    ],
)
def test_active_and_forced(body: dict, active: bool, forced: bool) -> None:
    assert tools.active(body) is active and tools.forced(body) is forced


def test_instructions_join_an_existing_system_message() -> None:
    messages = [{"role": "developer", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    described = tools.with_tool_instructions(messages, [WEATHER])
    assert len(described) == 2 and described[0]["role"] == "developer"
    assert (
        described[0]["content"].startswith("Be brief.\n\n") and '"name": "weather"' in described[0]["content"]
    )
    assert messages[0]["content"] == "Be brief."  # the caller's list is left alone


def test_instructions_become_the_system_message_when_there_is_none() -> None:
    described = tools.with_tool_instructions([{"role": "user", "content": "hi"}], [WEATHER, TIME])
    assert [m["role"] for m in described] == ["system", "user"]
    assert '"name": "weather"' in described[0]["content"] and '"name": "time"' in described[0]["content"]


def test_one_call_parses_into_openai_tool_calls() -> None:
    calls = tools.parse_calls(' {"name": "weather", "arguments": {"city": "Oslo"}} \n', [WEATHER])
    assert calls is not None and len(calls) == 1
    call = calls[0]
    assert call["type"] == "function" and call["id"].startswith("call_") and len(call["id"]) == 29
    assert call["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}


def test_several_calls_one_per_line_get_distinct_ids() -> None:
    text = '{"name": "weather", "arguments": {}}\n\n{"name": "time", "arguments": {"zone": "UTC"}}'
    calls = tools.parse_calls(text, [WEATHER, TIME])
    assert calls is not None and [c["function"]["name"] for c in calls] == ["weather", "time"]
    assert calls[0]["id"] != calls[1]["id"]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "It is sunny.",
        '{"name": "weather"}',
        '{"name": "weather", "arguments": "city=Oslo"}',
        '{"name": "stocks", "arguments": {}}',
        '["weather", {}]',
        '{"name": "weather", "arguments": {}}\nand some prose',
    ],
)
def test_text_that_is_not_calls_of_known_functions_is_none(text: str) -> None:
    assert tools.parse_calls(text, [WEATHER, TIME]) is None


def test_stream_deltas_open_each_call_then_carry_its_arguments() -> None:
    calls = tools.parse_calls(
        '{"name": "weather", "arguments": {"city": "Oslo"}}\n{"name": "time", "arguments": {}}',
        [WEATHER, TIME],
    )
    assert calls is not None
    deltas = tools.stream_deltas(calls)
    for position, call in enumerate(calls):
        own = [d for d in deltas if d["index"] == position]
        assert own[0] == {
            "index": position,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        assert all(set(d) == {"index", "function"} for d in own[1:])
        streamed = "".join(d["function"]["arguments"] for d in own)
        assert streamed == call["function"]["arguments"] and json.loads(streamed) is not None
