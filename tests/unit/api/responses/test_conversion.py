"""A Responses request in chat terms: its items as messages, its settings, its grammar."""

from __future__ import annotations

import pytest

from app.api.http.errors import InvalidRequestError
from app.api.prompting import structured_output
from app.api.requests.chat import ChatRequest
from app.api.responses import conversion
from app.api.responses.schemas import response_request_schema
from app.chat_formats.detect import by_name
from app.chat_formats.profile import TemplateProfile
from app.engine.types import Sampling

WEATHER = {"type": "function", "name": "weather", "parameters": {"type": "object"}}


def test_items_become_chat_messages_with_calls_gathered_in_one_turn() -> None:
    body = response_request_schema.load(
        {
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Weather in "},
                                             {"type": "input_text", "text": "Oslo?"}]},
                {"type": "function_call", "call_id": "c1", "name": "weather",
                 "arguments": '{"city":"Oslo"}'},
                {"type": "function_call", "call_id": "c2", "name": "weather",
                 "arguments": '{"city":"Bergen"}'},
                {"type": "function_call_output", "call_id": "c1", "output": "rain"},
                {"type": "reasoning", "summary": []},
            ],
        }
    )  # fmt: skip
    messages = conversion.messages(body)
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1] == {"role": "user", "content": "Weather in Oslo?"}
    assert messages[2]["role"] == "assistant" and messages[2]["content"] is None
    assert [call["id"] for call in messages[2]["tool_calls"]] == ["c1", "c2"]
    assert messages[2]["tool_calls"][1]["function"] == {"name": "weather", "arguments": '{"city":"Bergen"}'}
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "rain"}
    assert len(messages) == 4  # the reasoning item renders nothing


def test_settings_and_tools_in_chat_terms_leaving_out_what_is_unset() -> None:
    body = response_request_schema.load(
        {
            "input": "hi",
            "max_output_tokens": 9,
            "temperature": 0,
            "tools": [WEATHER],
            "tool_choice": "required",
        }
    )
    chat = conversion.as_chat(body)
    assert (chat.max_tokens, chat.max_param) == (9, "max_output_tokens")
    assert chat.sampling.temperature == 0 and chat.sampling.top_p == Sampling().top_p  # top_p: not sent
    assert chat.tools == [
        {
            "type": "function",
            "function": {"name": "weather", "description": None, "parameters": {"type": "object"}},
        }
    ]
    assert chat.tool_choice == "required"


def test_the_text_format_is_the_response_format_and_errors_name_text_format() -> None:
    """One grammar rule for every family: tools first, then the format; Responses' own field named."""

    def chat(**fields: object) -> ChatRequest:
        return conversion.as_chat(response_request_schema.load({"input": "x", **fields}))

    forced = structured_output.answer_grammar(chat(tools=[WEATHER], tool_choice="required"), GENERIC)
    assert forced.gbnf and "weather" in forced.gbnf and forced.param == "tools" and forced.triggers == ()
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    typed = chat(text={"format": {"type": "json_schema", "name": "out", "schema": schema}})
    assert typed.response_format == {"type": "json_schema", "json_schema": {"schema": schema}}
    answer = structured_output.answer_grammar(typed, GENERIC)
    assert answer.gbnf and "integer" in answer.gbnf and answer.param == "text.format"
    assert structured_output.answer_grammar(chat(text={"format": {"type": "json_object"}}), GENERIC).gbnf
    assert structured_output.answer_grammar(chat(), GENERIC) == (None, (), "text.format", False)
    refused = chat(text={"format": {"type": "json_schema", "name": "out", "schema": UNSUPPORTED}})
    with pytest.raises(InvalidRequestError) as caught:
        structured_output.answer_grammar(refused, GENERIC)
    assert caught.value.param == "text.format.schema"


GENERIC = TemplateProfile(by_name("Generic"), False, False, True, False, False, False)
UNSUPPORTED = {"type": "bogus"}  # what llama.cpp's converter cannot follow
