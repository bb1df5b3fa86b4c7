"""Output that must parse: `response_format` and forced tool calls turned into the engine's grammars."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.api.http.errors import InvalidRequestError
from app.api.prompting import tools
from app.api.requests.chat import ChatRequest
from app.chat_formats.profile import TemplateProfile
from app.engine import grammar
from app.engine.errors import GrammarError
from app.engine.tokenizer import Tokenizer

SCHEMA_PARAM = "response_format.json_schema.schema"


def schema_grammar(schema: Any, param: str = SCHEMA_PARAM) -> str:
    """GBNF for JSON that validates against `schema`; what the engine cannot enforce is a 400 naming it."""
    try:
        return grammar.schema_grammar(schema)
    except GrammarError as exc:
        raise InvalidRequestError(f"{param}: {exc.message}", param=param) from None


def response_grammar(response_format: Mapping[str, Any] | None) -> str | None:
    """The grammar `response_format` asks for, or None for free text."""
    response_format = response_format or {}
    kind = response_format.get("type", "text")
    if kind == "json_object":
        return grammar.json_object_grammar()
    if kind == "json_schema":
        return schema_grammar(response_format["json_schema"].get("schema") or {"type": "object"})
    return None


def answer_grammar(chat: ChatRequest, profile: TemplateProfile) -> tuple[str | None, tuple[str, ...], str]:
    """The grammar an answer follows (calls in the model's own syntax, `response_format`, or
    llama-server's `json_schema` or `grammar`), its lazy triggers, and the field that asked for it."""
    if (chat.json_schema is not None or chat.grammar) and chat.response_format is None:
        gbnf, own = own_grammar(chat.json_schema, chat.grammar)
        if chat.tools_active:  # as llama-server: "Cannot specify grammar with tools"
            raise InvalidRequestError(f"{own}: cannot be used with tools.", param=own)
        return gbnf, (), own
    calls = tools.grammar(chat, profile)
    answer = response_grammar(chat.response_format)
    # Under `auto`, an answer the client wants as JSON keeps its grammar: one grammar
    # holds a sequence, and llama.cpp's server refuses the pair outright.
    if calls is not None and not (calls.triggers and answer is not None):
        return calls.gbnf, calls.triggers, "tools"
    return answer, (), "response_format"


def own_grammar(json_schema: Any | None, gbnf: str | None) -> tuple[str | None, str]:
    """llama-server's own fields: `json_schema` through the converter (an empty one: any object),
    else `grammar` as it is; with the field that asked."""
    if json_schema is not None:
        return schema_grammar(json_schema or {"type": "object"}, "json_schema"), "json_schema"
    return gbnf, "grammar"


def llama_grammar(tokenizer: Tokenizer, json_schema: Any | None, gbnf: str | None) -> str | None:
    """The grammar llama-server's own fields ask for, checked as llama.cpp would load it."""
    return checked(tokenizer, *own_grammar(json_schema, gbnf))


def checked(tokenizer: Tokenizer, gbnf: str | None, param: str) -> str | None:
    """Refuse, before generating, a grammar llama.cpp itself would not load."""
    if gbnf is not None and not tokenizer.accepts_grammar(gbnf):
        raise InvalidRequestError(f"{param}: llama.cpp cannot build a grammar for this.", param=param)
    return gbnf
