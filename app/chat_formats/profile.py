"""What a chat template can do, found by rendering probe conversations, as llama.cpp's caps check does."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.chat_formats import detect
from app.chat_formats.base import ChatFormat

# render(messages, tools, extra variables) -> prompt text; raises on a template error.
Render = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None, dict[str, Any]], str]

_NAME = "probe_tool_name"
_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": _NAME,
            "description": "probe",
            "parameters": {"type": "object", "properties": {"probe_arg": {"type": "string"}}},
        },
    }
]


@dataclass(frozen=True)
class TemplateProfile:
    """A template's format and capabilities (llama-server's `chat_template_caps` names)."""

    format: ChatFormat
    supports_tools: bool
    supports_tool_calls: bool
    supports_system_role: bool
    supports_parallel_tool_calls: bool
    supports_object_arguments: bool
    thinks: bool
    # System turns after the first message (several at the start, one mid-conversation, one last),
    # as coding agents send them; a template without it raises or drops them (system_turns.py).
    supports_late_system: bool = True

    @property
    def native_tools(self) -> bool:
        """Tools go to the template itself; otherwise our own instruction describes them (Generic)."""
        return self.supports_tools

    def caps(self) -> dict[str, bool]:
        """As GET /props reports them."""
        return {
            "supports_tools": self.supports_tools,
            "supports_tool_calls": self.supports_tool_calls,
            "supports_system_role": self.supports_system_role,
            "supports_parallel_tool_calls": self.supports_parallel_tool_calls,
            "supports_object_arguments": self.supports_object_arguments,
            "supports_string_content": True,
            "supports_thinking": self.thinks,
        }


def profile(template: str, render: Render, named_format: str | None = None) -> TemplateProfile:
    """Probe `template` through `render`; `named_format` (from LLM_MODELS) overrides detection."""
    fmt = detect.by_name(named_format) if named_format else detect.detect(template)
    user = {"role": "user", "content": "probe_user"}

    def shows(text: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> bool:
        return shows_in_order([text], messages, tools)

    def shows_in_order(
        texts: list[str], messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
    ) -> bool:
        try:
            rendered = render(messages, tools, {})
        except Exception:  # noqa: BLE001 - a template that raises on a probe lacks the capability
            return False
        at = 0
        for text in texts:
            at = rendered.find(text, at)
            if at < 0:
                return False
        return True

    # Templates that concatenate the arguments as text raise on an object; those that print
    # an object without tojson write Python's repr.
    value = {"probe_arg": "probe_value"}
    with_object = [user, _calls(value), _result()]
    object_arguments = shows("probe_value", with_object, _TOOLS) and not shows("{'probe", with_object, _TOOLS)
    calls = [user, _calls(value if object_arguments else json.dumps(value)), _result()]
    parallel = [user, _calls(value if object_arguments else json.dumps(value), second=True), _result()]
    return TemplateProfile(
        format=fmt,
        supports_tools=shows(_NAME, [user], _TOOLS),
        supports_tool_calls=shows("probe_value", calls, _TOOLS),
        supports_system_role=shows("probe_system", [{"role": "system", "content": "probe_system"}, user]),
        supports_parallel_tool_calls=shows("probe_second", parallel, _TOOLS),
        supports_object_arguments=object_arguments,
        thinks=detect.thinks(template, fmt),
        supports_late_system=shows_in_order(list(_LATE_MARKS), _LATE_SYSTEM)
        and shows_in_order(["probe_user", "probe_last_system"], [user, _system("probe_last_system")]),
    )


def _system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


# Two system turns first (Codex's developer messages), then one between turns (Claude Code's).
_LATE_MARKS = (
    "probe_system",
    "probe_second_system",
    "probe_user",
    "probe_answer",
    "probe_late",
    "probe_next",
)
_LATE_SYSTEM = [
    _system("probe_system"),
    _system("probe_second_system"),
    {"role": "user", "content": "probe_user"},
    {"role": "assistant", "content": "probe_answer"},
    _system("probe_late"),
    {"role": "user", "content": "probe_next"},
]


def _calls(arguments: Any, second: bool = False) -> dict[str, Any]:
    names = [_NAME, "probe_second"] if second else [_NAME]
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": f"call{n:04d}x", "type": "function", "function": {"name": name, "arguments": arguments}}
            for n, name in enumerate(names)
        ],
    }


def _result() -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "call0000x", "name": _NAME, "content": "probe_result"}
