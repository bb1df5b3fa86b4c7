"""Grammars that make output parse: any JSON object, JSON following a schema, checked by llama.cpp.

Schemas become GBNF through llama.cpp's own converter (common/json-schema-to-grammar.cpp,
compiled from the pinned sdist as llm_json_grammar), so a schema constrains an answer here
exactly as it does in llama-server: the same rules, down to the whitespace a model may
write between tokens (pretty-printed JSON included, which a single optional space forbids).
"""

from __future__ import annotations

import json
from typing import Any

import llama_cpp
import llm_json_grammar

from app.engine.errors import GrammarError

# Bounds past this would make the grammar (and the time to build it) explode.
MAX_BOUND = 1000
_BOUNDED = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")


def json_object_grammar() -> str:
    """GBNF for any JSON object, as llama-server makes it (its converter on an empty schema)."""
    return schema_grammar({"type": "object"})


def schema_grammar(schema: Any) -> str:
    """GBNF for JSON that validates against `schema`; GrammarError for what the converter lacks."""
    check_bounds(schema)
    try:
        return llm_json_grammar.schema_to_grammar(json.dumps(schema))
    except ValueError as exc:
        raise GrammarError(f"this JSON schema is not supported: {_one_line(exc)}") from None


# llama.cpp's converter's whitespace between JSON tokens (common/json-schema-to-grammar.cpp).
SPACE_RULE = 'space ::= | " " | "\\n"{1,2} [ \\t]{0,20}\n'
# llama-server's chat answer under a JSON response format (its autoparser, common/chat-auto-parser-
# generator.cpp): the JSON, or the JSON in a ```json fence, whitespace around as its converter allows.
FENCED_ROOT = (
    'root ::= space space ("```json" space response-format space "```" | space response-format space)\n'
)


def fenced_schema_grammar(schema: Any) -> str:
    """GBNF for a chat answer that is JSON following `schema`, bare or fenced, as llama-server makes it."""
    rules = schema_rules({"response-format": schema})
    space = "" if any(line.startswith("space ::=") for line in rules.splitlines()) else SPACE_RULE
    return rules.rstrip("\n") + "\n" + space + FENCED_ROOT


def schema_rules(schemas: dict[str, Any]) -> str:
    """GBNF rules, one named after each key, for JSON following that key's schema (no root rule).

    One converter for them all, so the primitives they share are written once (as llama-server's
    chat formats build tool arguments).
    """
    for schema in schemas.values():
        check_bounds(schema)
    try:
        texts = [json.dumps(schema) for schema in schemas.values()]
        return llm_json_grammar.schema_rules(list(schemas), texts)
    except ValueError as exc:
        raise GrammarError(f"this JSON schema is not supported: {_one_line(exc)}") from None


def _one_line(exc: ValueError) -> str:
    """The converter's message without its heading line ("JSON schema conversion failed:")."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(line for line in lines if line != "JSON schema conversion failed:")


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
    try:
        text = gbnf.encode()
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: no text llama.cpp could read
        return False
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text, b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True
