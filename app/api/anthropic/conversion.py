"""A Messages request as the typed chat request the rest of the API serves: messages, tools, sampling."""

from __future__ import annotations

import json
from typing import Any

from marshmallow import ValidationError

from app.api.anthropic.tool_loading import LoadedTools, function_of
from app.api.http import sealing
from app.api.requests.chat import ChatRequest, ClearThinking, ClearToolUses, ContextEdit
from app.api.requests.generation import sampling_of

# output_config.effort as a thinking budget (tokens; None: no limit beyond max_tokens), and as the
# reasoning_effort templates such as gpt-oss's read.
EFFORT_BUDGETS: dict[str, int | None] = {
    "low": 1024,
    "medium": 4096,
    "high": 16384,
    "xhigh": 32768,
    "max": None,
}
EFFORTS = tuple(EFFORT_BUDGETS)
_TEMPLATE_EFFORT = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
CLEAR_THINKING, CLEAR_TOOL_USES = "clear_thinking_20251015", "clear_tool_uses_20250919"
EDITS = (CLEAR_THINKING, CLEAR_TOOL_USES)


def messages(body: dict[str, Any], tools: LoadedTools | None = None) -> list[dict[str, Any]]:
    """`system` and the messages' blocks as chat messages: tool results become tool turns, system
    messages stay where they are, and tool loading is noted where it happens (`tools`)."""
    tools = tools or LoadedTools([])
    conversation: list[dict[str, Any]] = []
    if body.get("system"):
        conversation.append({"role": "system", "content": body["system"]})
    for message in body["messages"]:
        blocks = message["content"]
        if message["role"] == "system":
            conversation.append({"role": "system", "content": _system_message(blocks, tools)})
            continue
        if any(block["type"].startswith("mcp_") for block in blocks):
            conversation += _with_server_calls(blocks)
            continue
        for block in blocks:
            if block["type"] == "tool_result":
                content = block["content"] + tools.load(block["references"])
                conversation.append(
                    {"role": "tool", "tool_call_id": block["tool_use_id"], "content": content}
                )
        text = "".join(block["text"] for block in blocks if block["type"] == "text")
        thought = "".join(_thinking(block) for block in blocks if block["type"] == "thinking")
        calls = [
            {
                "id": block["id"],
                "type": "function",
                "function": {"name": block["name"], "arguments": json.dumps(block["input"])},
            }
            for block in blocks
            if block["type"] == "tool_use"
        ]
        if calls:
            conversation.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        elif text or not any(block["type"] == "tool_result" for block in blocks):
            conversation.append({"role": message["role"], "content": text})
        if thought and conversation and conversation[-1]["role"] == "assistant":
            conversation[-1]["reasoning_content"] = thought
    return conversation


def _system_message(blocks: list[dict[str, Any]], tools: LoadedTools) -> str:
    """A system message's text, with the tools it adds or removes described where it does."""
    parts = []
    for block in blocks:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool_addition":
            parts.append(tools.load([block["name"]], block["definition"]).lstrip("\n"))
        elif block["type"] == "tool_removal":
            parts.append(tools.withdraw(block["name"]))
        else:
            raise ValidationError(
                f"a system message holds text and tool changes, not {block['type']!r} blocks"
            )
    return "\n\n".join(part for part in parts if part)


def _thinking(block: dict[str, Any]) -> str:
    """A thinking block's text; one shown without it (display: omitted) has it sealed in its signature."""
    if block["thinking"] or not block.get("signature"):
        return str(block["thinking"])
    return sealing.current().unseal(block["signature"]) or ""


_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def as_chat(body: dict[str, Any]) -> ChatRequest:
    """The chat request this Messages request amounts to, for the template, planning, tools and grammars."""
    choice = body.get("tool_choice") or {"type": "auto"}
    thinking = body.get("thinking") or {}
    effort = (body.get("output_config") or {}).get("effort")
    budget = thinking.get("budget_tokens") if thinking.get("type") == "enabled" else None
    if thinking.get("type") != "enabled" and effort is not None:
        budget = EFFORT_BUDGETS[effort]
    tools = LoadedTools(
        [t for t in body.get("tools") or [] if t.get("type", "custom") == "custom"]
    )  # an mcp_toolset's tools: as their server lists them; skipped tools: none
    conversation = messages(body, tools)
    return ChatRequest(
        model=body.get("model"),
        messages=conversation,
        max_tokens=body.get("max_tokens"),
        sampling=sampling_of(body),  # temperature, top_p, top_k: the same names
        stop=tuple(body.get("stop_sequences") or ()),
        stream=bool(body.get("stream")),
        return_progress=bool(body.get("return_progress")),
        chat_template_kwargs={"enable_thinking": thinking["type"] != "disabled"} if thinking else {},
        reasoning_budget=budget,
        reasoning_effort=_TEMPLATE_EFFORT[effort] if effort else None,
        reasoning_shown=thinking.get("display") != "omitted",
        parallel_tool_calls=False if choice.get("disable_parallel_tool_use") else None,
        tool_choice={"name": choice["name"]} if choice["type"] == "tool" else _CHOICES[choice["type"]],
        tools=[function_of(t) for t in tools.listed],
        late_tools=[function_of(t) for t in tools.late],
        withdrawn_tools=frozenset(tools.withdrawn),
        response_format=_response_format((body.get("output_config") or {}).get("format")),
        format_params=("output_config.format", "output_config.format.schema"),
        context_edits=context_edits(body.get("context_management") or {}),
    )


def _response_format(asked: dict[str, Any] | None) -> dict[str, Any] | None:
    """output_config.format ({"type": "json_schema", "schema"}) as chat's response_format."""
    if not asked:
        return None
    if asked.get("type") != "json_schema" or not isinstance(asked.get("schema"), dict):
        raise ValidationError('must be {"type": "json_schema", "schema": {...}}', "output_config.format")
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": asked["schema"]}}


def context_edits(management: dict[str, Any]) -> tuple[ContextEdit, ...]:
    """`context_management.edits` as the typed edits, with Anthropic's defaults."""
    edits: list[ContextEdit] = []
    for index, edit in enumerate(management.get("edits") or []):
        where = f"context_management.edits[{index}]"
        if edit["type"] == CLEAR_THINKING:
            keep = edit.get("keep") or {"type": "thinking_turns", "value": 1}
            edits.append(ClearThinking(None if keep == "all" else _amount(keep, "thinking_turns", where)))
            continue
        trigger = edit.get("trigger") or {"type": "input_tokens", "value": 100_000}
        by_uses = isinstance(trigger, dict) and trigger.get("type") == "tool_uses"
        value = _amount(trigger, "tool_uses" if by_uses else "input_tokens", f"{where}.trigger")
        inputs = edit.get("clear_tool_inputs")
        if not (isinstance(inputs, bool) or inputs is None or _names(inputs)):
            raise ValidationError("must be true, false or a list of tool names", f"{where}.clear_tool_inputs")
        edits.append(
            ClearToolUses(
                trigger_tokens=None if by_uses else value,
                trigger_uses=value if by_uses else None,
                keep_uses=_amount(edit.get("keep") or {"type": "tool_uses", "value": 3}, "tool_uses", where),
                clear_at_least=_amount(
                    edit.get("clear_at_least") or {"type": "input_tokens", "value": 0},
                    "input_tokens",
                    f"{where}.clear_at_least",
                ),  # fmt: skip
                exclude=frozenset(edit.get("exclude_tools") or ()),
                clear_inputs=frozenset(inputs) if isinstance(inputs, list) else bool(inputs),
            )
        )
    return tuple(edits)


def _amount(spec: Any, kind: str, where: str) -> int:
    """{"type": kind, "value": n} as n, checked."""
    if not isinstance(spec, dict) or spec.get("type") != kind:
        raise ValidationError(f'must be {{"type": "{kind}", "value": <n>}}', where)
    value = spec.get("value")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValidationError("value must be a whole number, 0 or more", where)
    return value


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(name, str) for name in value)


def _with_server_calls(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant turn holding calls the server made (MCP connector): each call and its result in
    order, as the model made them, with the text around them."""
    turns: list[dict[str, Any]] = []
    text = ""
    for block in blocks:
        if block["type"] == "text":
            text += block["text"]
        elif block["type"] == "mcp_tool_use":
            call = {"id": block["id"], "type": "function",
                    "function": {"name": block["name"], "arguments": json.dumps(block["input"])}}  # fmt: skip
            turns.append({"role": "assistant", "content": text or None, "tool_calls": [call]})
            text = ""
        elif block["type"] == "mcp_tool_result":
            content = block["content"] if not block.get("is_error") else f"Error: {block['content']}"
            turns.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": content})
    if text:
        turns.append({"role": "assistant", "content": text})
    return turns


def tool_input(arguments: str) -> dict[str, Any]:
    """A call's arguments as tool_use `input`; arguments cut short by max_tokens give what parses, or {}."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
