"""Earlier turns cleared before the prompt is made: Anthropic's `context_management` edits.

Claude Code asks for them on every request (`clear_thinking_20251015`, and
`clear_tool_uses_20250919` once a session is long): the reasoning of older assistant turns
dropped, and the results of older tool calls replaced by a placeholder once the prompt
passes a size. They work on the chat-shaped messages every family converts to, so the
rule is written once; what was cleared is reported back (`applied_edits`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from app.api.requests.chat import ChatRequest, ClearThinking, ClearToolUses, ContextEdit

PLACEHOLDER = "[This tool result was cleared to save context.]"


@dataclass(frozen=True)
class Applied:
    """One edit that cleared something: how many turns or tool uses, and their tokens."""

    edit: ContextEdit
    cleared: int
    tokens: int


def applied(
    chat: ChatRequest, count: Callable[[str], int], prompt_tokens: Callable[[ChatRequest], int]
) -> tuple[ChatRequest, list[Applied]]:
    """`chat` with its context edits made, in order (`count`: a text's tokens; `prompt_tokens`:
    the whole prompt's, asked only where a trigger needs it); and those that cleared anything."""
    done: list[Applied] = []
    for edit in chat.context_edits:
        if isinstance(edit, ClearThinking):
            messages, cleared, tokens = _without_thinking(chat.messages, edit, count)
        else:
            messages, cleared, tokens = _without_tool_uses(chat, edit, count, prompt_tokens)
        if cleared:
            chat = replace(chat, messages=messages)
            done.append(Applied(edit, cleared, tokens))
    return chat, done


def _without_thinking(
    messages: list[dict[str, Any]], edit: ClearThinking, count: Callable[[str], int]
) -> tuple[list[dict[str, Any]], int, int]:
    thinking = [i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("reasoning_content")]
    if edit.keep_turns is None or len(thinking) <= edit.keep_turns:
        return messages, 0, 0
    cleared = thinking[: len(thinking) - edit.keep_turns]
    tokens = sum(count(messages[i]["reasoning_content"]) for i in cleared)
    edited = [
        {k: v for k, v in m.items() if k != "reasoning_content"} if i in cleared else m
        for i, m in enumerate(messages)
    ]
    return edited, len(cleared), tokens


def _without_tool_uses(
    chat: ChatRequest,
    edit: ClearToolUses,
    count: Callable[[str], int],
    prompt_tokens: Callable[[ChatRequest], int],
) -> tuple[list[dict[str, Any]], int, int]:
    messages = chat.messages
    calls = [
        (call["id"], call["function"]["name"])
        for m in messages
        if m["role"] == "assistant"
        for call in m.get("tool_calls") or []
    ]
    clearable = [(call_id, name) for call_id, name in calls if name not in edit.exclude]
    if len(clearable) <= edit.keep_uses:
        return messages, 0, 0
    if edit.trigger_uses is not None:
        if len(calls) <= edit.trigger_uses:
            return messages, 0, 0
    elif edit.trigger_tokens is not None and prompt_tokens(chat) <= edit.trigger_tokens:
        return messages, 0, 0
    cleared = dict(clearable[: len(clearable) - edit.keep_uses])
    inputs = edit.clear_inputs
    edited, tokens = [], 0
    for message in messages:
        if message["role"] == "tool" and message.get("tool_call_id") in cleared:
            content = message.get("content")
            if content != PLACEHOLDER:
                tokens += count(content if isinstance(content, str) else str(content or ""))
                message = {**message, "content": PLACEHOLDER}
        elif message["role"] == "assistant" and message.get("tool_calls"):
            calls_ = []
            for call in message["tool_calls"]:
                name = call["function"]["name"]
                if call["id"] in cleared and (inputs is True or (inputs and name in inputs)):
                    arguments = call["function"].get("arguments")
                    tokens += count(arguments if isinstance(arguments, str) else str(arguments))
                    call = {**call, "function": {**call["function"], "arguments": "{}"}}
                calls_.append(call)
            message = {**message, "tool_calls": calls_}
        edited.append(message)
    if tokens < edit.clear_at_least:
        return messages, 0, 0
    return edited, len(cleared), tokens
