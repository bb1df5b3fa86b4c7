"""A Messages request in chat terms: blocks as messages, tool choices, tool inputs."""

from __future__ import annotations

import json

from app.api.anthropic import conversion
from app.api.anthropic.schemas import messages_request_schema
from app.api.prompting import tools
from app.api.requests.chat import ChatRequest
from app.chat_formats.detect import by_name
from app.chat_formats.profile import TemplateProfile

TOOL = {"name": "weather", "description": "The weather", "input_schema": {"type": "object"}}


def load(**fields: object) -> ChatRequest:
    """A Messages request as the schema loads it: the typed chat request it amounts to."""
    chat = messages_request_schema.load({"model": "m", "max_tokens": 8, **fields}).chat
    assert isinstance(chat, ChatRequest)
    return chat


def test_blocks_become_chat_messages_tool_results_their_own_turns() -> None:
    body = load(
        system=[{"type": "text", "text": "Be brief."}],
        messages=[
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "toolu_1", "name": "weather",
                 "input": {"city": "Oslo"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "rain"},
            ]},
        ],
    )  # fmt: skip
    messages = body.messages
    assert messages[0] == {"role": "system", "content": "Be brief."}
    assert messages[1] == {"role": "user", "content": "Weather in Oslo?"}
    assert messages[2]["content"] == "Looking." and messages[2]["tool_calls"][0]["id"] == "toolu_1"
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    assert messages[3] == {"role": "tool", "tool_call_id": "toolu_1", "content": "rain"}
    assert len(messages) == 4  # the tool result's user turn has no text of its own


def test_tool_choices_map_onto_openai_ones() -> None:
    assert (load(messages=[{"role": "user", "content": "x"}])).tool_choice == "auto"
    for anthropic_choice, openai_choice in [
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "weather"}, {"name": "weather"}),
    ]:
        body = load(messages=[{"role": "user", "content": "x"}], tools=[TOOL], tool_choice=anthropic_choice)
        chat = body
        assert chat.tool_choice == openai_choice
        assert chat.tools[0]["function"]["parameters"] == {"type": "object"}


def _profile(fmt: str, native: bool) -> TemplateProfile:
    return TemplateProfile(by_name(fmt), native, native, True, native, native, False)


def test_a_forced_tool_has_a_whole_grammar_and_auto_a_lazy_one_only_in_a_native_format() -> None:
    forced = load(messages=[{"role": "user", "content": "x"}], tools=[TOOL], tool_choice={"type": "any"})
    whole = tools.grammar(forced, _profile("Generic", native=False))
    assert whole is not None and "weather" in whole.gbnf and not whole.triggers
    free = load(messages=[{"role": "user", "content": "x"}], tools=[TOOL])
    assert tools.grammar(free, _profile("Generic", native=False)) is None
    lazy = tools.grammar(free, _profile("Hermes 2 Pro", native=True))
    assert lazy is not None and "<tool_call>" in lazy.gbnf
    assert any("<tool_call>" in trigger for trigger in lazy.triggers)


def test_tool_input_is_what_parses_as_an_object() -> None:
    assert conversion.tool_input('{"city": "Oslo"}') == {"city": "Oslo"}
    assert conversion.tool_input('{"city": "Os') == {}  # cut short by max_tokens
    assert conversion.tool_input("[1, 2]") == {}
