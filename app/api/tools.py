"""Function calling: tools described to the model, calls forced by grammar, parsed back into tool_calls."""

from __future__ import annotations

import json
import uuid
from typing import Any

from app.api.structured_output import schema_grammar

_INSTRUCTION = (
    "You can call these functions. To call one, answer with only a JSON object "
    '{{"name": <function name>, "arguments": <arguments object>}}.\n{functions}'
)


def active(body: dict[str, Any]) -> bool:
    """Whether this request may answer with tool calls."""
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


def forced(body: dict[str, Any]) -> bool:
    """Whether the answer must be a tool call (`required`, or one named function)."""
    return active(body) and (
        body.get("tool_choice") == "required" or isinstance(body.get("tool_choice"), dict)
    )


def with_tool_instructions(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation with the functions described in its system message.

    Small models' chat templates ignore a `tools` variable, so the description goes in
    as text, which every template renders.
    """
    functions = "\n".join(json.dumps(tool["function"]) for tool in tools)
    instruction = _INSTRUCTION.format(functions=functions)
    if messages and messages[0]["role"] in ("system", "developer"):
        first = {**messages[0], "content": f"{messages[0]['content']}\n\n{instruction}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def call_grammar(body: dict[str, Any]) -> str:
    """GBNF for exactly one call of an allowed function, `name` before `arguments`."""
    choice = body.get("tool_choice")
    allowed = [
        t["function"]
        for t in body["tools"]
        if not isinstance(choice, dict) or t["function"]["name"] == choice["name"]
    ]
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"const": function["name"]},
                "arguments": function.get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for function in allowed
    ]
    schema = calls[0] if len(calls) == 1 else {"anyOf": calls}
    return schema_grammar(schema, param="tools", prop_order=["name", "arguments"])


def parse_calls(text: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """OpenAI tool_calls if `text` is one or more calls of known functions (one JSON object per line)."""
    names = {tool["function"]["name"] for tool in tools}
    calls = []
    for line in [part for part in text.strip().splitlines() if part.strip()] or [""]:
        try:
            call = json.loads(line)
        except ValueError:
            return None
        if (
            not isinstance(call, dict)
            or call.get("name") not in names
            or not isinstance(call.get("arguments"), dict)
        ):
            return None
        calls.append(
            {
                "id": "call_" + uuid.uuid4().hex[:24],
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
        )
    return calls


def stream_deltas(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI's streamed shape for finished calls: id, type and name first, then the arguments."""
    deltas = []
    for position, call in enumerate(calls):
        deltas.append(
            {
                "index": position,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
        )
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        for piece in (arguments[:half], arguments[half:]):
            if piece:
                deltas.append({"index": position, "function": {"arguments": piece}})
    return deltas
