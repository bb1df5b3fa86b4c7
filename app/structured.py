"""Output that must parse: JSON mode, JSON schemas and forced tool calls, as llama.cpp grammars."""

from __future__ import annotations

import json
from typing import Any

from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from app.errors import InvalidRequestError

SCHEMA_PARAM = "response_format.json_schema.schema"


# Bounds past this would make the grammar (and the time to build it) explode.
_MAX_BOUND = 1000
_BOUNDED = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")


def schema_grammar(schema: Any, param: str = SCHEMA_PARAM, prop_order: list[str] | None = None) -> str:
    """GBNF for JSON that validates against `schema`; a feature the converter lacks is a 400 naming it."""
    _check_bounds(schema, param)
    try:
        return json_schema_to_gbnf(json.dumps(schema), prop_order=prop_order)
    except Exception as exc:  # noqa: BLE001 - any failure of the converter means "unsupported here"
        raise InvalidRequestError(f"{param}: this JSON schema is not supported: {exc}", param=param) from None


def _check_bounds(schema: Any, param: str) -> None:
    if isinstance(schema, dict):
        for key in _BOUNDED:
            bound = schema.get(key)
            if isinstance(bound, int | float) and bound > _MAX_BOUND:
                raise InvalidRequestError(
                    f"{param}: {key} {bound} is above the {_MAX_BOUND} this server supports.", param=param
                )
        for value in schema.values():
            _check_bounds(value, param)
    elif isinstance(schema, list):
        for value in schema:
            _check_bounds(value, param)


def response_grammar(response_format: dict[str, Any] | None) -> str | None:
    """The grammar `response_format` asks for, or None for free text."""
    kind = (response_format or {}).get("type", "text")
    if kind == "json_object":
        return JSON_GBNF
    if kind == "json_schema":
        return schema_grammar(response_format["json_schema"].get("schema") or {"type": "object"})
    return None


def checked(tokenizer: Any, gbnf: str | None, param: str) -> str | None:
    """Refuse, before generating, a grammar llama.cpp itself would not load."""
    if gbnf is not None and not tokenizer.accepts_grammar(gbnf):
        raise InvalidRequestError(f"{param}: llama.cpp cannot build a grammar for this.", param=param)
    return gbnf
