"""JSON grammars: the schema converter's limits, the size bounds guard, and llama.cpp's own check."""

from __future__ import annotations

from typing import Any

import pytest

from app.engine.errors import GrammarError
from app.engine.sampling import grammar, schema_converter


def test_object_grammar_is_llama_cpps_json() -> None:
    assert "root" in grammar.json_object_grammar() and "object" in grammar.json_object_grammar()


def test_schema_grammar_keeps_the_schemas_property_order() -> None:
    gbnf = grammar.schema_grammar(
        {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}
    )
    root = next(line for line in gbnf.splitlines() if line.startswith("root ::="))
    assert root.index("b-kv") < root.index("a-kv"), root


def test_whitespace_between_tokens_is_llama_servers() -> None:
    # llama.cpp's converter lets a model write JSON pretty-printed (a newline or two, then up to
    # twenty spaces or tabs) where llama-cpp-python's allowed one optional space and derailed it.
    gbnf = grammar.schema_grammar({"type": "object", "properties": {"a": {"type": "integer"}}})
    assert 'space ::= | " " | "\\n"{1,2} [ \\t]{0,20}' in gbnf.splitlines()
    assert 'root ::= "{" space  (a-kv )? space "}"' in gbnf.splitlines()
    rules = grammar.schema_rules({"fn0-args": {"type": "object"}, "fn1-args": {"enum": ["x", "y"]}})
    assert 'fn1-args ::= ("\\"x\\"" | "\\"y\\"")' in rules.splitlines()
    assert not any(line.startswith("root ::=") for line in rules.splitlines())


@pytest.mark.parametrize(
    "schema",
    # (An unanchored pattern llama.cpp cannot follow is any string there, with a warning: as here.)
    [{"$ref": "#/definitions/nope"}, {"type": "string", "pattern": "^(($"}, {"type": "bogus"}],
)
def test_what_the_converter_lacks_is_a_grammar_error(schema: dict) -> None:
    with pytest.raises(GrammarError, match="not supported"):
        grammar.schema_grammar(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "array", "maxItems": 5000},
        {
            "type": "object",
            "properties": {"deep": {"type": "array", "items": {"type": "string", "minLength": 1001}}},
        },
        {"anyOf": [{"type": "string"}, {"type": "object", "maxProperties": 1e6}]},
    ],
)
def test_bounds_that_would_explode_the_grammar_are_refused(schema: dict) -> None:
    with pytest.raises(GrammarError, match="above the 1000"):
        grammar.schema_grammar(schema)


def test_a_tools_bounds_past_the_limit_are_left_out_and_the_rest_kept() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {
        "content": {"type": "string", "maxLength": 524288, "minLength": 1},
        "lines": {"type": "array", "items": [{"maxItems": 5000}, {"maxItems": 3}]},
    }, "required": ["content"]}  # fmt: skip
    relaxed = grammar.without_large_bounds(schema)
    assert relaxed == {"type": "object", "properties": {
        "content": {"type": "string", "minLength": 1},
        "lines": {"type": "array", "items": [{}, {"maxItems": 3}]},
    }, "required": ["content"]}  # fmt: skip
    assert schema["properties"]["content"]["maxLength"] == 524288  # the request's own is untouched
    grammar.schema_rules({"fn0-args": relaxed})  # now within the bounds
    deep: dict = {}
    node = deep
    for _ in range(100_000):  # far deeper than recursion goes: walked without it
        node["a"] = node = {}
    grammar.without_large_bounds(deep)


def test_bounds_at_the_limit_are_fine() -> None:
    grammar.check_bounds({"type": "array", "maxItems": grammar.MAX_BOUND, "items": [{"minLength": 3}]})


def test_json_strings_admit_no_raw_control_characters() -> None:
    # JSON forbids them; a grammar that allowed a raw newline in a string made answers
    # that finished by themselves fail to parse ("Invalid control character").
    gbnf = grammar.schema_grammar(
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    )
    char_rule = next(line for line in gbnf.splitlines() if line.startswith("char ::="))
    assert char_rule.startswith(r'char ::= [^"\\\x7F\x00-\x1F]'), char_rule
    assert r"\x00-\x1F" in grammar.json_object_grammar()


def test_nesting_deeper_than_the_bound_is_refused_without_recursing() -> None:
    schema: dict = {"type": "string"}
    for _ in range(990):  # as deep as a request's JSON may nest: the check itself must not recurse
        schema = {"type": "array", "items": schema}
    with pytest.raises(GrammarError, match="nested more than 100 deep"):
        grammar.schema_grammar(schema)


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"type": "object", "properties": {f"p{n}": {} for n in range(300)}}, "more than 256 optional"),
        (
            {"type": "object", "properties": {"a" * 200_000: {}}, "additionalProperties": {"type": "string"}},
            "longer than 1000 characters",
        ),
    ],
)
def test_what_made_the_converter_crash_or_crawl_is_refused_by_name(schema: dict, match: str) -> None:
    with pytest.raises(GrammarError, match=match):
        grammar.schema_grammar(schema)


def test_a_schema_that_crashes_the_converter_costs_its_process_only() -> None:
    # 20,000 chained $refs overflowed the converter's stack: in the worker, a SIGSEGV.
    chain = {f"d{n}": {"$ref": f"#/$defs/d{n + 1}"} for n in range(20_000)} | {"d20000": {"type": "string"}}
    with pytest.raises(GrammarError, match="made the schema converter fail"):
        grammar.schema_grammar({"$defs": chain, "$ref": "#/$defs/d0"})
    assert "root ::=" in grammar.schema_grammar({"type": "integer"})  # a new converter process answers


def test_a_conversion_past_the_time_bound_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(schema_converter, "TIMEOUT", 0.2)
    many = {"type": "object", "properties": {f"p{n}": {} for n in range(250)}}
    slow = {"type": "object", "properties": {f"o{n}": many for n in range(50)}}
    with pytest.raises(GrammarError, match="took longer than 0.2 s"):
        grammar.schema_grammar(slow)
    monkeypatch.undo()
    assert "root ::=" in grammar.schema_grammar({"type": "boolean"})
