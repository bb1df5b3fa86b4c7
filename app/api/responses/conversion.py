"""A Responses request as the typed chat request the rest of the API serves: messages, tools, a grammar."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.api.prompting.call_grammars import CUSTOM_INPUT
from app.api.requests.chat import ChatRequest
from app.api.responses.request import Item, ResponseRequest
from app.api.responses.tool_kinds import kinds_of, model_name


def messages(asked: ResponseRequest) -> list[dict[str, Any]]:
    """`instructions` and the input items as chat messages; a run of function calls is one assistant turn."""
    conversation: list[dict[str, Any]] = []
    if asked.instructions:
        conversation.append({"role": "system", "content": asked.instructions})
    thought = ""  # a reasoning item's text, for the assistant turn that follows it
    for item in asked.input:
        if item["type"] == "reasoning":
            thought = item["text"]
        elif item["type"] == "message":
            conversation.append({"role": item["role"], "content": item["content"]})
        elif item["type"] in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments")
            if item["type"] == "custom_tool_call":  # to the model, a call with its input as an argument
                arguments = json.dumps({CUSTOM_INPUT: item["input"]}, ensure_ascii=False)
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": model_name(item["name"], item.get("namespace")), "arguments": arguments},
            }
            last = conversation[-1] if conversation else None
            if last and last["role"] == "assistant" and last.get("tool_calls") and not last.get("content"):
                last["tool_calls"].append(call)
            else:
                conversation.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif item["type"] in ("function_call_output", "custom_tool_call_output"):
            conversation.append({"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]})
        elif item["type"] == "compaction":  # what /v1/responses/compact made of the turns before
            conversation.append({"role": "system", "content": COMPACTED + item["summary"]})
        elif item["type"] == "mcp_call":  # a call the server made: to the model, a call and its result
            call_id = f"call_mcp_{len(conversation)}"
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            conversation.append({"role": "assistant", "content": None, "tool_calls": [call]})
            result = item["output"] if item.get("error") is None else f"Error: {item['error']}"
            conversation.append({"role": "tool", "tool_call_id": call_id, "content": result or ""})
        if (
            thought
            and item["type"] != "reasoning"
            and conversation
            and conversation[-1]["role"] == "assistant"
        ):
            conversation[-1]["reasoning_content"], thought = thought, ""
    return conversation


LOGPROBS = "message.output_text.logprobs"  # the `include` that asks for the answer's token log-probabilities
COMPACTED = "A summary of the conversation before this point:\n\n"


def as_chat(asked: ResponseRequest) -> ChatRequest:
    """The chat request a Responses request amounts to, for the template, planning, tools and grammars."""
    kinds = kinds_of(asked.tools)
    choice = asked.tool_choice
    if isinstance(choice, Mapping) and "name" in choice:  # a function or custom tool, by its model name
        choice = {"name": model_name(choice["name"], choice.get("namespace"))}
    return ChatRequest(
        model=asked.model,
        messages=messages(asked),
        max_tokens=asked.max_output_tokens,
        max_param="max_output_tokens",
        sampling=asked.sampling,
        stream=asked.stream,
        return_progress=asked.return_progress,
        prompt_cache_key=asked.prompt_cache_key,
        cache_salt=asked.cache_salt,
        truncation=asked.truncation,
        tool_choice=choice,
        reasoning_effort=asked.reasoning_effort,
        logprobs=LOGPROBS in asked.include,
        top_logprobs=asked.top_logprobs or 0,
        priority=asked.priority,
        parallel_tool_calls=asked.parallel_tool_calls,
        tools=kinds.functions,  # mcp tools: as their servers list them (mcp_loop)
        response_format=response_format(asked.text_format),
        format_params=("text.format", "text.format.schema"),
    )


def response_format(text_format: Item | None) -> dict[str, Any] | None:
    """`text.format` as chat's `response_format`: the same grammars, the same rules beside tools."""
    text_format = text_format or {}
    kind = text_format.get("type", "text")
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"schema": text_format.get("schema")}}
    return None if kind == "text" else {"type": kind}
