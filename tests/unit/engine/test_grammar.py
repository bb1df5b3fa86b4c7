"""JSON grammars: the schema converter's limits, the size bounds guard, and llama.cpp's own check."""

from __future__ import annotations

import pytest

from app.engine.errors import GrammarError
from app.engine.sampling import grammar


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
