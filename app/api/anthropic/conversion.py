"""A Messages request as the typed chat request the rest of the API serves: messages, tools, sampling."""

from __future__ import annotations

import json
from typing import Any

from app.api.requests.chat import ChatRequest
from app.api.requests.generation import sampling_of


def messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """`system` and the messages' blocks as chat messages: tool results become tool turns."""
    conversation: list[dict[str, Any]] = []
    if body.get("system"):
        conversation.append({"role": "system", "content": body["system"]})
    for message in body["messages"]:
        blocks = message["content"]
        if any(block["type"].startswith("mcp_") for block in blocks):
            conversation += _with_server_calls(blocks)
            continue
        for block in blocks:
            if block["type"] == "tool_result":
                conversation.append(
                    {"role": "tool", "tool_call_id": block["tool_use_id"], "content": block["content"]}
                )
        text = "".join(block["text"] for block in blocks if block["type"] == "text")
        thought = "".join(block.get("thinking", "") for block in blocks if block["type"] == "thinking")
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


_CHOICES = {"auto": "auto", "any": "required", "none": "none"}


def as_chat(body: dict[str, Any]) -> ChatRequest:
    """The chat request this Messages request amounts to, for the template, planning, tools and grammars."""
    choice = body.get("tool_choice") or {"type": "auto"}
    thinking = body.get("thinking") or {}
    return ChatRequest(
        model=body.get("model"),
        messages=messages(body),
        max_tokens=body.get("max_tokens"),
        sampling=sampling_of(body),  # temperature, top_p, top_k: the same names
        stop=tuple(body.get("stop_sequences") or ()),
        stream=bool(body.get("stream")),
        return_progress=bool(body.get("return_progress")),
        chat_template_kwargs={"enable_thinking": thinking["type"] != "disabled"} if thinking else {},
        reasoning_budget=thinking.get("budget_tokens") if thinking.get("type") == "enabled" else None,
        parallel_tool_calls=False if choice.get("disable_parallel_tool_use") else None,
        tool_choice={"name": choice["name"]} if choice["type"] == "tool" else _CHOICES[choice["type"]],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description"),
                    "parameters": t["input_schema"],
                },
            }
            for t in body.get("tools") or []
            if t.get("type", "custom") == "custom"  # an mcp_toolset's tools: as their server lists them
        ],
    )


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
