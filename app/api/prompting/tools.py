"""Function calling for every protocol: the tools a request allows, the calls' grammar, OpenAI's calls."""

from __future__ import annotations

from typing import Any

from app.api.http.errors import InvalidRequestError
from app.api.prompting.call_grammars import CallGrammar, calls_grammar
from app.chat_formats.answer import AnswerReader
from app.chat_formats.base import Function, Parsed, ToolCall
from app.chat_formats.profile import TemplateProfile
from app.engine.errors import GrammarError


def active(body: dict[str, Any]) -> bool:
    """Whether this request may answer with tool calls."""
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


def forced(body: dict[str, Any]) -> bool:
    """Whether the answer must be a tool call (`required`, or one named function)."""
    return active(body) and (
        body.get("tool_choice") == "required" or isinstance(body.get("tool_choice"), dict)
    )


def parallel(body: dict[str, Any]) -> bool:
    """`parallel_tool_calls`, true unless the request says false."""
    return body.get("parallel_tool_calls") is not False


def functions(body: dict[str, Any]) -> tuple[Function, ...]:
    """The functions the answer may call: all of `tools`, or the one `tool_choice` names."""
    if not active(body):
        return ()
    choice = body.get("tool_choice")
    return tuple(
        Function(t["function"]["name"], t["function"].get("parameters") or {"type": "object"})
        for t in body["tools"]
        if not isinstance(choice, dict) or t["function"]["name"] == choice["name"]
    )


def grammar(body: dict[str, Any], profile: TemplateProfile) -> CallGrammar | None:
    """The calls' grammar: whole for a forced call, lazy under `auto` when the template has its own
    syntax (our own instruction's answers, on templates without tools, are parsed as they come)."""
    allowed = list(functions(body))
    if not allowed or not (forced(body) or profile.native_tools):
        return None
    try:
        return calls_grammar(profile.format, allowed, parallel(body), lazy=not forced(body))
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
