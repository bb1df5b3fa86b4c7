"""Grammars that make output parse: any JSON object, JSON following a schema, checked by llama.cpp."""

from __future__ import annotations

import json
from typing import Any

import llama_cpp
from llama_cpp.llama_grammar import JSON_GBNF, SchemaConverter, json_schema_to_gbnf

from app.engine.errors import GrammarError

# JSON forbids raw control characters in strings; llama-cpp-python's converter admits them
# ("Invalid control character" when the answer is parsed), llama.cpp's own excludes them.
_ANY_CHAR = r'char ::= [^"\\]'
_JSON_CHAR = r'char ::= [^"\\\x7F\x00-\x1F]'
# Bounds past this would make the grammar (and the time to build it) explode.
MAX_BOUND = 1000
_BOUNDED = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")


def json_object_grammar() -> str:
    """GBNF for any JSON object."""
    return JSON_GBNF


def schema_grammar(schema: Any, prop_order: list[str] | None = None) -> str:
    """GBNF for JSON that validates against `schema`; GrammarError for what the converter lacks."""
    check_bounds(schema)
    try:
        gbnf: str = json_schema_to_gbnf(json.dumps(schema), prop_order=prop_order)
    except Exception as exc:  # noqa: BLE001 - any failure of the converter means "unsupported here"
        raise GrammarError(f"this JSON schema is not supported: {exc}") from None
    return gbnf.replace(_ANY_CHAR, _JSON_CHAR)


def schema_rules(schemas: dict[str, Any]) -> str:
    """GBNF rules, one named after each key, for JSON following that key's schema (no root rule).

    One converter for them all, so the primitives they share are written once.
    """
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    for name, schema in schemas.items():
        check_bounds(schema)
        try:
            converter.visit(converter.resolve_refs(schema, name), name)
        except Exception as exc:  # noqa: BLE001 - any failure of the converter means "unsupported here"
            raise GrammarError(f"this JSON schema is not supported: {exc}") from None
    rules: str = converter.format_grammar()
    return rules.replace(_ANY_CHAR, _JSON_CHAR)


def check_bounds(schema: Any) -> None:
    """Refuse a size bound so large that the grammar would explode."""
    if isinstance(schema, dict):
        for key in _BOUNDED:
            bound = schema.get(key)
            if isinstance(bound, int | float) and bound > MAX_BOUND:
                raise GrammarError(f"{key} {bound} is above the {MAX_BOUND} this server supports.")
        for value in schema.values():
            check_bounds(value)
    elif isinstance(schema, list):
        for value in schema:
            check_bounds(value)


def grammar_is_valid(vocab: Any, gbnf: str) -> bool:
    """Whether llama.cpp accepts the grammar over `vocab` (checked before any byte of a stream)."""
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, gbnf.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True
