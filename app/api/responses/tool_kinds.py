"""The Responses API's tool kinds as the model sees them: functions, namespaces, custom tools, hosted ones.

Codex groups tools under a `namespace` and declares `custom` tools whose input is free
text (its `apply_patch`, with a Lark grammar). A model knows only functions with JSON
arguments, so each tool becomes one: a namespace's functions are named
`<namespace>.<name>`, and a custom tool takes one string argument, `input` (held to its
grammar by the sampler). The model's calls are then written back in the kind the client
declared: a function_call naming its namespace, a custom_tool_call with its raw input.
Tools OpenAI's servers run (web_search, file_search, image_generation...) cannot run here;
they are left out (skipped_tools.py), not refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.api.prompting.call_grammars import CUSTOM_INPUT  # the one argument a custom tool's call carries


@dataclass(frozen=True)
class Declared:
    """A tool as the client declared it: `function` or `custom`, its name and its namespace."""

    kind: str
    name: str
    namespace: str | None = None


def model_name(name: str, namespace: str | None) -> str:
    """The name the model calls a tool by."""
    return f"{namespace}.{name}" if namespace else name


@dataclass(frozen=True)
class ToolKinds:
    """Every tool of a request by the name the model calls it, and the hosted ones left out."""

    declared: dict[str, Declared]
    functions: list[dict[str, Any]]  # as chat's function tools (custom ones with their input format)
    skipped: list[str]

    def of(self, called: str) -> Declared:
        """What the model's call of `called` is, as the client declared it (a function if unknown)."""
        return self.declared.get(called, Declared("function", called))


def kinds_of(tools: Iterable[Mapping[str, Any]]) -> ToolKinds:
    """The tools of a Responses request (as the schema loaded them) as the model sees them."""
    declared: dict[str, Declared] = {}
    functions: list[dict[str, Any]] = []
    skipped: list[str] = []

    def add(tool: Mapping[str, Any], namespace: str | None) -> None:
        name = model_name(tool["name"], namespace)
        declared[name] = Declared(tool["type"], tool["name"], namespace)
        functions.append(_function(tool, name))

    for tool in tools:
        if tool["type"] == "namespace":
            for member in tool["tools"]:
                add(member, tool["name"])
        elif tool["type"] in ("function", "custom"):
            add(tool, None)
        elif tool["type"] != "mcp":  # mcp tools: as their servers list them (mcp_loop)
            skipped.append(tool["type"])
    return ToolKinds(declared, functions, skipped)


def _function(tool: Mapping[str, Any], name: str) -> dict[str, Any]:
    if tool["type"] == "function":
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.get("description"),
                "parameters": tool.get("parameters"),
            },
        }
    parameters = {
        "type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string", "description": "The tool's input, as free text"}},
        "required": [CUSTOM_INPUT],
    }
    found = tool.get("format") or {}
    grammar = (found["syntax"], found["definition"]) if found.get("type") == "grammar" else None
    described = {"name": name, "description": tool.get("description"), "parameters": parameters}
    return {"type": "function", "function": described, "input_format": grammar}


def custom_input(arguments: str) -> str:
    """A custom tool call's raw input, from the arguments the model wrote (as much as parses)."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return partial_input(arguments)
    text = value.get(CUSTOM_INPUT) if isinstance(value, dict) else None
    return text if isinstance(text, str) else ""


def partial_input(arguments: str) -> str:
    """The input a custom call's arguments hold so far, while they stream: the decoded prefix of the
    `input` string, up to its last complete character."""
    key = arguments.find(f'"{CUSTOM_INPUT}"')
    colon = arguments.find(":", key + len(CUSTOM_INPUT) + 2) if key >= 0 else -1
    opening = arguments.find('"', colon + 1) if colon >= 0 else -1
    if opening < 0:
        return ""
    body, at = arguments[opening + 1 :], 0
    while at < len(body) and body[at] != '"':
        if body[at] == "\\":
            width = 6 if body[at + 1 : at + 2] == "u" else 2
            if at + width > len(body):
                break
            at += width
        else:
            at += 1
    try:
        decoded: str = json.loads('"' + body[:at] + '"')
    except ValueError:
        return ""
    return decoded
