"""Function calling: when tools apply, how they are described, and parsing calls back out of text."""

from __future__ import annotations

import json

import pytest

from app.api.prompting import conversation, tools
from app.api.requests.chat import ChatRequest
from app.chat_formats.answer import AnswerReader, DeltaStream
from app.chat_formats.base import Function
from app.chat_formats.detect import by_name

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
    chat = ChatRequest(**body)
    assert chat.tools_active is active and chat.tools_forced is forced


def test_instructions_join_an_existing_system_message() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    described = conversation.with_tool_instructions(messages, [WEATHER])
    assert described[0]["content"].startswith("Be brief.\n\nYou can call these functions.")
    assert '"name": "weather"' in described[0]["content"] and described[1:] == messages[1:]


def test_instructions_become_the_system_message_when_there_is_none() -> None:
    described = conversation.with_tool_instructions([{"role": "user", "content": "hi"}], [WEATHER, TIME])
    assert described[0]["role"] == "system" and '"name": "time"' in described[0]["content"]


def test_earlier_calls_are_written_as_the_instruction_asks_on_templates_without_tools() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
    (turn,) = conversation.with_calls_as_text([{"role": "assistant", "content": None, "tool_calls": [call]}])
    assert json.loads(turn["content"]) == {"name": "weather", "arguments": {"city": "Oslo"}}


GENERIC = AnswerReader(by_name("Generic"), (Function("weather", {}), Function("time", {})))


def test_one_call_parses_into_openai_tool_calls() -> None:
    parsed = GENERIC.read(' {"name": "weather", "arguments": {"city": "Oslo"}} \n', partial=False)
    (call,) = tools.openai_calls(parsed, GENERIC)
    assert call["type"] == "function" and call["id"].startswith("call_") and len(call["id"]) == 29
    assert call["function"] == {"name": "weather", "arguments": '{"city": "Oslo"}'}
    assert parsed.content == "" and tools.finish_reason(parsed, "stop") == "tool_calls"


def test_several_calls_one_per_line_get_distinct_ids() -> None:
    text = '{"name": "weather", "arguments": {}}\n\n{"name": "time", "arguments": {"zone": "UTC"}}'
    calls = tools.openai_calls(GENERIC.read(text, partial=False), GENERIC)
    assert [c["function"]["name"] for c in calls] == ["weather", "time"]
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
def test_text_that_is_not_calls_of_known_functions_stays_text(text: str) -> None:
    parsed = GENERIC.read(text, partial=False)
    assert parsed.calls == [] and parsed.content == text


def test_streamed_calls_open_with_id_and_name_then_carry_their_arguments() -> None:
    text = '{"name": "weather", "arguments": {"city": "Oslo"}}\n{"name": "time", "arguments": {}}'
    stream = DeltaStream(GENERIC)
    deltas = [d for end in range(1, len(text) + 1) for d in stream.update(text[:end], final=False)]
    deltas += stream.update(text, final=True)
    assert [d.kind for d in deltas if d.kind != "arguments"] == ["call", "call"]
    for index in (0, 1):
        own = [d for d in deltas if d.index == index and d.kind == "arguments"]
        assert json.loads("".join(d.text for d in own)) == json.loads(
            tools.openai_calls(stream.last, GENERIC)[index]["function"]["arguments"]
        )
    assert not [d for d in deltas if d.kind == "content"]


def test_a_forced_answer_cut_off_before_a_name_is_still_a_call() -> None:
    forced = AnswerReader(by_name("Generic"), GENERIC.functions, forced=True)
    parsed = forced.read('{"na', partial=False)
    assert [c.name for c in parsed.calls] == ["weather"] and parsed.content == ""
    assert tools.finish_reason(parsed, "length") == "length"
