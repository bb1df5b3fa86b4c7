"""Output that must parse: `response_format` and forced tool calls turned into the engine's grammars."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from app.api.http.errors import InvalidRequestError
from app.api.prompting import tools
from app.api.requests.chat import ChatRequest
from app.api.requests.generation import Constraint
from app.chat_formats.profile import TemplateProfile
from app.engine.errors import GrammarError
from app.engine.sampling import grammar, tag_grammars, text_grammars
from app.engine.sampling.tag_grammars import TaggedStructure
from app.engine.tokenizer import Tokenizer

SCHEMA_PARAM = "response_format.json_schema.schema"


def schema_grammar(schema: Any, param: str = SCHEMA_PARAM) -> str:
    """GBNF for JSON that validates against `schema`; what the engine cannot enforce is a 400 naming it."""
    try:
        return grammar.schema_grammar(schema)
    except GrammarError as exc:
        raise InvalidRequestError(f"{param}: {exc.message}", param=param) from None


def response_grammar(
    response_format: Mapping[str, Any] | None, params: tuple[str, str] = ("response_format", SCHEMA_PARAM)
) -> str | None:
    """The grammar `response_format` asks for, or None for free text; `params` name the format's
    field and its schema's in the family's request, for a schema the converter cannot follow."""
    response_format = response_format or {}
    kind, (field, schema_param) = response_format.get("type", "text"), params
    if kind == "json_object":  # llama-server's form may carry a schema
        schema = response_format.get("schema")
        return schema_grammar(schema, f"{field}.schema") if schema else grammar.json_object_grammar()
    if kind == "json_schema":
        return schema_grammar(
            response_format["json_schema"].get("schema") or {"type": "object"}, schema_param
        )
    if kind == "structural_tag":  # vLLM's form of response_format
        return tag_grammar(response_format, field)
    return None


def tag_grammar(tag: Mapping[str, Any], param: str) -> str:
    """GBNF for a structural tag (its fields validated); a schema the converter lacks is a 400."""
    structures = [TaggedStructure(s["begin"], s["schema"], s["end"]) for s in tag["structures"]]
    try:
        return tag_grammars.structural_tag_grammar(structures, tag["triggers"])
    except GrammarError as exc:
        raise InvalidRequestError(f"{param}: {exc.message}", param=param) from None


class AnswerGrammar(NamedTuple):
    """The grammar an answer follows, its lazy triggers, the field that asked for it, and whether the
    answer is JSON a model may fence (```json, llama-server's chat: its content is the JSON alone)."""

    gbnf: str | None
    triggers: tuple[str, ...]
    param: str
    fenced_json: bool = False


def answer_grammar(chat: ChatRequest, profile: TemplateProfile, fences: bool = False) -> AnswerGrammar:
    """The grammar an answer follows: calls in the model's own syntax, `response_format`, or
    llama-server's or vLLM's constraint fields. With `fences` (llama-server's chat completions), a
    JSON schema from `response_format` or llama-server's `json_schema` field is its chat grammar."""
    if (constraint := chat.constraint) is not None:
        if chat.tools_active:  # as llama-server: "Cannot specify grammar with tools"
            param = constraint.param
            raise InvalidRequestError(f"{param}: cannot be used with tools.", param=param)
        if fences and constraint.param == "json_schema":
            return AnswerGrammar(
                fenced_grammar(constraint.value, constraint.param), (), constraint.param, True
            )
        return AnswerGrammar(constraint_grammar(constraint), (), constraint.param)
    calls = tools.grammar(chat, profile)
    schema = json_schema_of(chat.response_format)
    answer = response_grammar(chat.response_format, chat.format_params)
    # Under `auto`, an answer the client wants as JSON keeps its grammar: one grammar
    # holds a sequence, and llama.cpp's server refuses the pair outright.
    if calls is not None and not (calls.triggers and answer is not None):
        return AnswerGrammar(calls.gbnf, calls.triggers, "tools")
    if fences and schema is not None:
        return AnswerGrammar(fenced_grammar(*schema), (), "response_format", True)
    return AnswerGrammar(answer, (), chat.format_params[0])


def json_schema_of(response_format: Mapping[str, Any] | None) -> tuple[Any, str] | None:
    """The JSON schema a `response_format` asks the answer to follow, with its field; None for others."""
    response_format = response_format or {}
    kind = response_format.get("type", "text")
    if kind == "json_object":  # llama-server's form may carry a schema
        return response_format.get("schema") or {"type": "object"}, "response_format.schema"
    if kind == "json_schema":
        return response_format["json_schema"].get("schema") or {"type": "object"}, SCHEMA_PARAM
    return None


def fenced_grammar(schema: Any, param: str) -> str:
    """llama-server's chat grammar for a JSON answer following `schema` ({} or None: any object)."""
    try:
        return grammar.fenced_schema_grammar(schema or {"type": "object"})
    except GrammarError as exc:
        raise InvalidRequestError(f"{param}: {exc.message}", param=param) from None


def constraint_grammar(constraint: Constraint) -> str:
    """GBNF for llama-server's or vLLM's constraint: a JSON schema through llama.cpp's converter
    ({} any object), a grammar as it is, a regular expression or a choice made into one."""
    kind, value, param = constraint.kind, constraint.value, constraint.param
    if kind == "json_schema":
        return schema_grammar(value or {"type": "object"}, param)
    if kind == "json_object":
        return grammar.json_object_grammar()
    if kind == "grammar":
        gbnf: str = value
        return gbnf
    if kind == "structural_tag":
        return tag_grammar(value, param)
    try:
        return text_grammars.regex_grammar(value) if kind == "regex" else text_grammars.choice_grammar(value)
    except GrammarError as exc:
        raise InvalidRequestError(f"{param}: {exc.message}", param=param) from None


def llama_grammar(tokenizer: Tokenizer, constraint: Constraint | None) -> str | None:
    """The grammar a completion's constraint asks for, checked as llama.cpp would load it."""
    if constraint is None:
        return None
    return checked(tokenizer, constraint_grammar(constraint), constraint.param)


def checked(tokenizer: Tokenizer, gbnf: str | None, param: str) -> str | None:
    """Refuse, before generating, a grammar llama.cpp itself would not load or one past the server's
    bounds, saying why in a 400 that names the field."""
    if gbnf is not None:
        try:
            tokenizer.check_grammar(gbnf)
        except GrammarError as exc:
            raise InvalidRequestError(f"{param}: {exc.message}", param=param) from None
    return gbnf
