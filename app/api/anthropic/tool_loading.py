"""Tools that come and go mid-conversation: deferred tools a tool search loads, added and removed tools.

Claude Code marks most of its tools `defer_loading` and gives the model a ToolSearch tool;
its result's `tool_reference` blocks load the tools it found. It also adds and removes
tools in system messages (`tool_addition` / `tool_removal`) rather than changing `tools`,
so that the prompt before them, and its cache, stays as it was. Here too: the template's
tool list holds only the tools loaded from the start, and a tool loaded later is described
where it was loaded, in the format ToolSearch's own description promises (a <functions>
block of one <function> JSON line each); the model may call every tool loaded and not
withdrawn.
"""

from __future__ import annotations

import json
from typing import Any


def function_of(tool: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic tool as OpenAI's function tool, which the template and the grammars read."""
    return {
        "type": "function",
        "function": {
            "name": tool["name"],
            "description": tool.get("description"),
            "parameters": tool.get("input_schema") or {"type": "object"},
        },
    }


class LoadedTools:
    """The request's tools as the conversation changes them, message by message."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.listed = [t for t in tools if not t.get("defer_loading")]
        self._deferred = {t["name"]: t for t in tools if t.get("defer_loading")}
        self._late: dict[str, dict[str, Any]] = {}
        self.withdrawn: set[str] = set()

    @property
    def late(self) -> list[dict[str, Any]]:
        return list(self._late.values())

    def load(self, names: list[str], definition: dict[str, Any] | None = None) -> str:
        """Load tools by name (deferred ones), or one by its `definition`; their description, to put
        where they were loaded ("" when none is new)."""
        listed = {t["name"] for t in self.listed}
        found = [definition] if definition is not None else [self._deferred.get(name) for name in names]
        lines = []
        for tool in found:
            if tool is None:
                continue  # a reference to no deferred tool: nothing to describe (the client's mistake)
            self.withdrawn.discard(tool["name"])
            if tool["name"] in listed:
                continue
            self._late[tool["name"]] = tool
            lines.append(f"<function>{json.dumps(_described(tool))}</function>")
        return f"\n<functions>\n{chr(10).join(lines)}\n</functions>" if lines else ""

    def withdraw(self, name: str) -> str:
        self.withdrawn.add(name)
        return f"The tool {name} is no longer available."


def _described(tool: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": tool.get("description") or "",
        "name": tool["name"],
        "parameters": tool.get("input_schema") or {"type": "object"},
    }
