"""What Claude Code sends, in chat terms: system turns, effort, deferred and added tools, sealed thinking."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask import Flask
from marshmallow import ValidationError

from app.api.anthropic import window
from app.api.anthropic.schemas import messages_request_schema
from app.api.http import sealing
from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.api.requests.chat import ChatRequest, ClearThinking, ClearToolUses
from tests.unit.conftest import make_config

READ = {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}
GREP = {"name": "Grep", "description": "Search", "input_schema": {"type": "object"}, "defer_loading": True}
SEARCH = {"name": "ToolSearch", "description": "Find tools", "input_schema": {"type": "object"}}


def load(**fields: Any) -> ChatRequest:
    chat = messages_request_schema.load({"model": "m", "max_tokens": 32000, **fields}).chat
    assert isinstance(chat, ChatRequest)
    return chat


def test_system_turns_stay_where_claude_code_puts_them_and_the_billing_block_goes() -> None:
    chat = load(
        system=[
            {
                "type": "text",
                "text": "x-anthropic-billing-header: cc_version=2.1.328.2c2; cc_entrypoint=sdk-cli;",
            },
            {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}},
        ],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "Say hello."}]},
            {"role": "system", "content": [{"type": "text", "text": "# Environment", "cache_control": {}}]},
        ],
        metadata={"user_id": json.dumps({"device_id": "d"})},
    )
    assert chat.messages == [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "Say hello."},
        {"role": "system", "content": "# Environment"},
    ]


def test_adaptive_thinking_and_effort_become_a_budget_and_omitted_display_hides_the_text() -> None:
    chat = load(
        messages=[{"role": "user", "content": "x"}],
        thinking={"type": "adaptive", "display": "omitted"},
        output_config={"effort": "low"},
    )
    assert chat.reasoning_budget == 1024 and chat.reasoning_effort == "low" and not chat.reasoning_shown
    assert chat.chat_template_kwargs == {"enable_thinking": True}
    most = load(
        messages=[{"role": "user", "content": "x"}],
        thinking={"type": "adaptive"},
        output_config={"effort": "max"},
    )
    assert most.reasoning_budget is None and most.reasoning_effort == "high" and most.reasoning_shown
    asked = load(
        messages=[{"role": "user", "content": "x"}],
        thinking={"type": "enabled", "budget_tokens": 500},
        output_config={"effort": "high"},
    )
    assert asked.reasoning_budget == 500  # an explicit budget wins
    with pytest.raises(ValidationError):
        load(messages=[{"role": "user", "content": "x"}], output_config={"effort": "extreme"})


def test_deferred_tools_load_by_reference_and_by_addition_and_go_by_removal() -> None:
    chat = load(
        tools=[READ, SEARCH, GREP, {"type": "web_search_20250305", "name": "web_search"}],
        messages=[
            {"role": "user", "content": "find"},
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {"query": "select:Grep"}}
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "tool_reference", "tool_name": "Grep"}],
                    }
                ],
            },
            {
                "role": "system",
                "content": [
                    {
                        "type": "tool_addition",
                        "tool": {
                            "type": "tool_definition",
                            "definition": {
                                "name": "Glob",
                                "description": "Glob",
                                "input_schema": {"type": "object"},
                            },
                        },
                    },
                    {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "Read"}},
                ],
            },
        ],
    )
    assert [t["function"]["name"] for t in chat.tools] == ["Read", "ToolSearch"]  # the template's list
    assert [t["function"]["name"] for t in chat.late_tools] == ["Grep", "Glob"]
    assert [t["function"]["name"] for t in chat.tools_in_force] == ["ToolSearch", "Grep", "Glob"]
    result, note = chat.messages[2], chat.messages[3]
    assert (
        result["role"] == "tool" and '<function>{"description": "Search", "name": "Grep"' in result["content"]
    )
    assert note["role"] == "system" and '"name": "Glob"' in note["content"]
    assert "The tool Read is no longer available." in note["content"]


def test_context_management_edits_are_typed_with_anthropics_defaults() -> None:
    chat = load(
        messages=[{"role": "user", "content": "x"}],
        context_management={
            "edits": [
                {"type": "clear_thinking_20251015", "keep": "all"},
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "tool_uses", "value": 30},
                    "keep": {"type": "tool_uses", "value": 5},
                    "clear_at_least": {"type": "input_tokens", "value": 100},
                    "exclude_tools": ["Bash"],
                    "clear_tool_inputs": ["Read"],
                },
                {"type": "clear_tool_uses_20250919"},
            ]
        },
    )
    assert chat.context_edits == (
        ClearThinking(None),
        ClearToolUses(None, 30, 5, 100, frozenset({"Bash"}), frozenset({"Read"})),
        ClearToolUses(100_000, None, 3, 0, frozenset(), False),
    )
    with pytest.raises(ValidationError, match="thinking_turns"):
        load(
            messages=[{"role": "user", "content": "x"}],
            context_management={"edits": [{"type": "clear_thinking_20251015", "keep": {"value": 1}}]},
        )


def test_thinking_handed_back_with_only_its_signature_is_read_from_the_seal(app: Flask) -> None:
    with app.test_request_context():
        signature = sealing.current().seal("I should greet.")
        turns = [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "", "signature": signature},
                    {"type": "text", "text": "Hello"},
                ],
            },
            {"role": "user", "content": "again"},
        ]
        assert load(messages=turns).messages[1]["reasoning_content"] == "I should greet."
        forged = signature[:-8] + "AAAAAAAA"
        turns[1]["content"][0]["signature"] = forged  # type: ignore[index]
        assert "reasoning_content" not in load(messages=turns).messages[1]  # altered: no reasoning at all


def test_max_tokens_past_the_window_is_cut_and_a_prompt_that_fills_it_is_too_long() -> None:
    config = make_config(LLM_N_CTX="1000")
    chat, bound = window.within(ChatRequest(max_tokens=32000), 400, config)
    assert (chat.max_tokens, bound) == (600, True)
    assert window.within(ChatRequest(max_tokens=100), 400, config) == (ChatRequest(max_tokens=100), False)
    with pytest.raises(ContextLengthError, match=r"^prompt is too long: 1000 tokens > 999 maximum$"):
        window.within(ChatRequest(max_tokens=10), 1000, config)
    capped = make_config(LLM_N_CTX="1000", LLM_MAX_TOKENS_LIMIT="200")
    with pytest.raises(InvalidRequestError, match=r"^max_tokens: 300 > 200, which is the maximum allowed"):
        window.within(ChatRequest(max_tokens=300), 10, capped)
