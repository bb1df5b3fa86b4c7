"""Grammars that make output parse: any JSON object, JSON following a schema, checked by llama.cpp.

Schemas become GBNF through llama.cpp's own converter (common/json-schema-to-grammar.cpp,
compiled from the pinned sdist as llm_json_grammar, run in a process of its own by
schema_converter.py), so a schema constrains an answer here exactly as it does in llama-server:
the same rules, down to the whitespace a model may write between tokens (pretty-printed JSON
included, which a single optional space forbids). Before it, a schema is checked here for what
would make the grammar explode or the converter fail, so that the client reads why.
"""

from __future__ import annotations

import json
from typing import Any

import llama_cpp

from app.engine.errors import GrammarError
from app.engine.sampling import gbnf_check, schema_converter

# Bounds past this would make the grammar (and the time to build it) explode.
MAX_BOUND = 1000
_BOUNDED = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties")
MAX_DEPTH = 100  # schemas inside schemas (the converter recurses once per level)
MAX_OPTIONAL = 256  # optional properties of one object (the converter's time grows as their cube)
MAX_NAME = 1000  # characters of a property name (the converter recurses once per character)


def json_object_grammar() -> str:
    """GBNF for any JSON object, as llama-server makes it (its converter on an empty schema)."""
    return schema_grammar({"type": "object"})


def schema_grammar(schema: Any) -> str:
    """GBNF for JSON that validates against `schema`; GrammarError for what the converter lacks."""
    check_bounds(schema)
    return schema_converter.schema_to_grammar(json.dumps(schema))


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
    texts = [json.dumps(schema) for schema in schemas.values()]
    return schema_converter.schema_rules(list(schemas), texts)


def without_large_bounds(schema: Any) -> Any:
    """`schema` with each size bound past MAX_BOUND left out (a copy, made without recursion): a
    grammar it may follow, looser there. For tools' arguments, whose schemas agents write with bounds
    such as `maxLength: 524288` that mean "any" and that no grammar could spell out."""
    top: list[Any] = [None]
    pending: list[tuple[Any, Any, Any]] = [(schema, top, 0)]  # (node, its copy's parent, its key there)
    while pending:
        node, parent, key = pending.pop()
        copy: Any = node
        if isinstance(node, dict):
            copy = {}
            for name, value in node.items():
                if name in _BOUNDED and isinstance(value, int | float) and value > MAX_BOUND:
                    continue
                copy[name] = None  # in the schema's order; filled when its value is walked
                pending.append((value, copy, name))
        elif isinstance(node, list):
            copy = [None] * len(node)
            pending.extend((value, copy, n) for n, value in enumerate(node))
        parent[key] = copy
    return top[0]


def check_bounds(schema: Any) -> None:
    """Refuse a schema that would make the grammar explode or the converter fail: a size bound too
    large, nesting too deep, too many optional properties or too long a name (walked without
    recursion, so that no nesting the request's JSON could hold is too deep for this check)."""
    pending = [(schema, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise GrammarError(
                f"the schema is nested more than {MAX_DEPTH} deep, the most this server supports."
            )
        if isinstance(node, dict):
            for key in _BOUNDED:
                bound = node.get(key)
                if isinstance(bound, int | float) and bound > MAX_BOUND:
                    raise GrammarError(f"{key} {bound} is above the {MAX_BOUND} this server supports.")
            _check_properties(node)
            pending.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            pending.extend((value, depth + 1) for value in node)


def _check_properties(node: dict[str, Any]) -> None:
    properties = node.get("properties")
    if not isinstance(properties, dict):
        return
    required: Any = node.get("required")
    named = (
        set(required) if isinstance(required, list) and all(isinstance(n, str) for n in required) else set()
    )
    if len(properties.keys() - named) > MAX_OPTIONAL:
        raise GrammarError(
            f"an object has more than {MAX_OPTIONAL} optional properties, the most this server supports."
        )
    if any(len(name) > MAX_NAME for name in properties):
        raise GrammarError(
            f"a property name is longer than {MAX_NAME} characters, the most this server supports."
        )


def check_gbnf(vocab: Any, gbnf: str, token_of: gbnf_check.TokenOf) -> None:
    """Refuse (GrammarError, saying why) a grammar llama.cpp would not build over `vocab`, or one past
    this server's bounds: checked in Python first (gbnf_check), so that no grammar llama.cpp's parser
    cannot survive reaches it, then built once by llama.cpp itself, before any byte of a stream."""
    try:
        text = gbnf.encode()
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape: no text llama.cpp could read
        raise GrammarError("the grammar is not valid UTF-8 text") from None
    gbnf_check.check(gbnf, token_of)
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, text, b"root")
    if not sampler:
        raise GrammarError("llama.cpp cannot build a grammar for this")
    llama_cpp.llama_sampler_free(sampler)
