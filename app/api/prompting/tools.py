"""Function calling for every protocol: the tools a request allows, the calls' grammar, OpenAI's calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.api.http.errors import InvalidRequestError
from app.api.prompting.call_grammars import CallGrammar, calls_grammar
from app.api.requests.chat import ChatRequest
from app.chat_formats.answer import AnswerReader
from app.chat_formats.base import Function, Parsed, ToolCall
from app.chat_formats.profile import TemplateProfile
from app.engine.errors import GrammarError


def functions(chat: ChatRequest) -> tuple[Function, ...]:
    """The functions the answer may call: all of `tools`, or the one `tool_choice` names."""
    if not chat.tools_active:
        return ()
    choice = chat.tool_choice
    return tuple(
        Function(
            t["function"]["name"],
            t["function"].get("parameters") or {"type": "object"},
            tuple(t["input_format"]) if t.get("input_format") else None,
        )
        for t in chat.tools_in_force
        if not isinstance(choice, Mapping) or t["function"]["name"] == choice["name"]
    )


def rendered(tool_list: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools as a chat template reads them: OpenAI's fields only (not a custom tool's grammar)."""
    return [{"type": t.get("type", "function"), "function": t["function"]} for t in tool_list]


def grammar(chat: ChatRequest, profile: TemplateProfile) -> CallGrammar | None:
    """The calls' grammar: whole for a forced call, lazy under `auto` when the template has its own
    syntax (our own instruction's answers, on templates without tools, are parsed as they come,
    unless a tool's input must follow a grammar: then an answer that opens with a call is held to it)."""
    allowed = list(functions(chat))
    held = any(f.input_format for f in allowed)
    if not allowed or not (chat.tools_forced or profile.native_tools or held):
        return None
    try:
        return calls_grammar(profile.format, allowed, chat.parallel_calls, lazy=not chat.tools_forced)
    except GrammarError as exc:
        raise InvalidRequestError(f"tools: {exc.message}", param="tools") from None


def openai_calls(parsed: Parsed, reader: AnswerReader) -> list[dict[str, Any]]:
    """Parsed calls as OpenAI's tool_calls, each with a new id in the format's style."""
    return [openai_call(call, reader.new_id()) for call in parsed.calls]


def openai_call(call: ToolCall, call_id: str) -> dict[str, Any]:
    """One call as OpenAI writes it."""
    return {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def finish_reason(parsed: Parsed, engine_reason: str) -> str:
    """`tool_calls` for an answer that ended in calls; a call cut short keeps `length`."""
    if parsed.calls and engine_reason != "length":
        return "tool_calls"
    return engine_reason
