"""The Responses API's objects: the Response, its message and function_call items, its usage."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from app.api.prompting.items import new_id
from app.api.responses.request import Item, ResponseRequest
from app.api.responses.tool_kinds import Declared, custom_input

__all__ = ["new_id"]  # the presenter names every id it makes through here


def text_part(text: str, logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def message_item(
    item_id: str, text: str | None, status: str, logprobs: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An assistant message; `text` None while it has no content part yet."""
    content = [] if text is None else [text_part(text, logprobs)]
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def reasoning_item(
    item_id: str, text: str | None, status: str, sealed: Callable[[str], str] | None = None
) -> dict[str, Any]:
    """The model's thinking, as reasoning text; `text` None while it has none yet. `sealed`: asked with
    include reasoning.encrypted_content, the text sealed for a stateless client's next turn."""
    content = [] if text is None else [{"type": "reasoning_text", "text": text}]
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "status": status,
        "summary": [],
        "content": content,
    }
    if sealed is not None:
        item["encrypted_content"] = None if text is None else sealed(text)
    return item


def call_item(
    item_id: str, call: dict[str, Any], status: str, declared: Declared | None = None
) -> dict[str, Any]:
    """A call, from a chat tool call, in the kind the client declared its tool: a function_call (its
    namespace named, if it has one) or a custom_tool_call with its raw input."""
    function = call["function"]
    declared = declared or Declared("function", function["name"])
    item: dict[str, Any] = {
        "type": "function_call",
        "id": item_id,
        "call_id": call["id"],
        "name": declared.name,
    }
    if declared.kind == "custom":
        item.update(type="custom_tool_call", input=custom_input(function["arguments"]))
    else:
        item["arguments"] = function["arguments"]
    if declared.namespace is not None:
        item["namespace"] = declared.namespace
    item["status"] = status
    return item


def mcp_list_tools_item(
    label: str, tools: list[dict[str, Any]], error: str | None, item_id: str | None = None
) -> dict[str, Any]:
    return {
        "type": "mcp_list_tools",
        "id": item_id or new_id("mcpl"),
        "server_label": label,
        "tools": tools,
        "error": error,
    }


def mcp_call_item(
    label: str,
    name: str,
    arguments: str,
    output: str | None,
    error: str | None,
    item_id: str | None = None,
    status: str | None = None,
    approval: str | None = None,
) -> dict[str, Any]:
    """A call the server made to an MCP server's tool, with its output or its error (`status`: while
    it is being made, in_progress; `approval`: the approval request it answers, if any)."""
    return {
        "type": "mcp_call",
        "id": item_id or new_id("mcp"),
        "server_label": label,
        "name": name,
        "arguments": arguments,
        "output": output,
        "error": error,
        "status": status or ("failed" if error is not None else "completed"),
        "approval_request_id": approval,
    }


def mcp_approval_request_item(
    label: str, name: str, arguments: str, item_id: str | None = None
) -> dict[str, Any]:
    return {
        "type": "mcp_approval_request",
        "id": item_id or new_id("mcpr"),
        "server_label": label,
        "name": name,
        "arguments": arguments,
    }


def _echoed_tool(tool: Item) -> dict[str, Any]:
    """A tool as the Response echoes it; an mcp tool's headers and authorization never (credentials)."""
    if tool.get("type") == "mcp":
        tool = {
            key: value
            for key, value in tool.items()
            if key not in ("authorization", "connector_id", "tunnel_id")
        }
        defaults = {
            "server_url": None,
            "server_description": None,
            "allowed_tools": None,
            "require_approval": "always",
        }
        return {**defaults, **tool, "headers": None}
    if tool.get("type", "function") != "function":  # custom, namespace, hosted: as sent
        return dict(tool)
    return {"type": "function", "description": None, "parameters": None, "strict": None, **tool}


def _echoed_choice(choice: str | Mapping[str, str], custom: set[str]) -> str | dict[str, str]:
    if isinstance(choice, str):
        return choice
    if "server_label" in choice:
        return {"type": "mcp", **choice}
    return {"type": "custom" if choice["name"] in custom else "function", **choice}


def _custom_names(tools: tuple[Item, ...]) -> set[str]:
    members = [m for t in tools if t.get("type") == "namespace" for m in t.get("tools") or []]
    return {t["name"] for t in [*tools, *members] if t.get("type") == "custom"}


def usage(input_tokens: int, output_tokens: int, cached_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }


class ResponseHeader:
    """One Response's id, time and echoed settings; `render` gives the object at any status."""

    def __init__(
        self, asked: ResponseRequest, model: str, stored: bool = False, conversation: str | None = None
    ) -> None:
        self.id = new_id("resp")
        self.created_at = int(time.time())
        self.model = model
        self.settings = {
            "background": asked.background,
            "instructions": asked.instructions,
            "max_output_tokens": asked.max_output_tokens,
            "metadata": dict(asked.metadata),
            "parallel_tool_calls": asked.parallel_tool_calls is not False,
            "previous_response_id": asked.previous_response_id,
            "prompt_cache_key": asked.prompt_cache_key,
            "reasoning": {"effort": None, "summary": None},
            "store": stored,  # whether it is kept: false with LLM_STORE=off, whatever was asked
            "temperature": asked.sampling.temperature,  # as sent, else the default it was sampled at
            "text": {"format": dict(asked.text_format or {"type": "text"})},
            "tool_choice": _echoed_choice(asked.tool_choice or "auto", _custom_names(asked.tools)),
            "tools": [_echoed_tool(tool) for tool in asked.tools],
            "top_p": asked.sampling.top_p,
            "top_logprobs": asked.top_logprobs,
            "truncation": asked.truncation or "disabled",
        }
        if conversation is not None:
            self.settings["conversation"] = {"id": conversation}
        if asked.user is not None:  # OpenAI's schema has it a string, or absent
            self.settings["user"] = asked.user

    def render(
        self,
        status: str,
        output: list[dict[str, Any]] | None = None,
        tokens: dict[str, Any] | None = None,
        error: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The Response: `in_progress` (no output yet), `completed`, `incomplete` or `failed`."""
        rendered = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "completed_at": int(time.time()) if status == "completed" else None,
            "error": error,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "model": self.model,
            "output": output or [],
            **self.settings,
        }
        if tokens is not None:  # OpenAI's schema has usage an object, or absent
            rendered["usage"] = tokens
        return rendered
