"""Hostile inputs for every place a client's bytes reach C or C++ code, and the request bodies that carry
them: shared by the native-boundary tests (the crash inputs of issue 71 in every field) and the fuzz
campaign (generated inputs, seeded)."""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

MODEL = "SmolLM2-135M-Instruct.Q4_1"
CHAT = [{"role": "user", "content": "Say hi."}]


def nested_gbnf(depth: int) -> str:
    return "root ::= " + "(" * depth + '"a"' + ")" * depth


def nested_regex(depth: int) -> str:
    return "(" * depth + "a" + ")" * depth


def nested_lark(depth: int) -> str:
    return "start: " + "(" * depth + '"a"' + ")" * depth


def ref_chain(length: int) -> dict[str, Any]:
    """A schema whose $refs chain `length` deep (20,000 overflowed llama.cpp's converter)."""
    chain = {f"d{n}": {"$ref": f"#/$defs/d{n + 1}"} for n in range(length)}
    return {"$defs": {**chain, f"d{length}": {"type": "string"}}, "$ref": "#/$defs/d0"}


@dataclass(frozen=True)
class Carrier:
    """A route and field that hands one kind of input (gbnf, regex, lark or schema) to native code."""

    name: str
    kind: str
    path: str
    body: Callable[[Any], dict[str, Any]]


def _tool(schema: Any) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "f", "parameters": schema}}]


def _custom(syntax: str) -> Callable[[str], dict[str, Any]]:
    def body(definition: str) -> dict[str, Any]:
        tool = {
            "type": "custom",
            "name": "t",
            "format": {"type": "grammar", "syntax": syntax, "definition": definition},
        }
        return {
            "model": MODEL,
            "input": "Use the tool.",
            "tools": [tool],
            "tool_choice": "required",
            "store": False,
        }

    return body


COMPLETION = {"prompt": "Say hi.", "max_tokens": 2}
CHATTING = {"messages": CHAT, "max_tokens": 2}
CARRIERS = [
    Carrier("completions.grammar", "gbnf", "/v1/completions", lambda g: {**COMPLETION, "grammar": g}),
    Carrier(
        "completion.grammar", "gbnf", "/completion", lambda g: {"prompt": "Hi", "n_predict": 2, "grammar": g}
    ),
    Carrier("chat.grammar", "gbnf", "/v1/chat/completions", lambda g: {**CHATTING, "grammar": g}),
    Carrier(
        "chat.guided_grammar", "gbnf", "/v1/chat/completions", lambda g: {**CHATTING, "guided_grammar": g}
    ),
    Carrier(
        "chat.structured_outputs.grammar",
        "gbnf",
        "/v1/chat/completions",
        lambda g: {**CHATTING, "structured_outputs": {"grammar": g}},
    ),
    Carrier(
        "completions.structured_outputs.grammar",
        "gbnf",
        "/v1/completions",
        lambda g: {**COMPLETION, "structured_outputs": {"grammar": g}},
    ),
    Carrier("chat.guided_regex", "regex", "/v1/chat/completions", lambda r: {**CHATTING, "guided_regex": r}),
    Carrier(
        "chat.structured_outputs.regex",
        "regex",
        "/v1/chat/completions",
        lambda r: {**CHATTING, "structured_outputs": {"regex": r}},
    ),
    Carrier("responses.custom.regex", "regex", "/v1/responses", _custom("regex")),
    Carrier("responses.custom.lark", "lark", "/v1/responses", _custom("lark")),
    Carrier(
        "chat.response_format",
        "schema",
        "/v1/chat/completions",
        lambda s: {
            **CHATTING,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": s}},
        },
    ),
    Carrier(
        "completion.json_schema",
        "schema",
        "/completion",
        lambda s: {"prompt": "Hi", "n_predict": 2, "json_schema": s},
    ),
    Carrier("chat.guided_json", "schema", "/v1/chat/completions", lambda s: {**CHATTING, "guided_json": s}),
    Carrier(
        "chat.tools",
        "schema",
        "/v1/chat/completions",
        lambda s: {**CHATTING, "tools": _tool(s), "tool_choice": "required"},
    ),
    Carrier(
        "ollama.format",
        "schema",
        "/api/chat",
        lambda s: {
            "model": MODEL,
            "messages": CHAT,
            "format": s,
            "stream": False,
            "options": {"num_predict": 2},
        },
    ),
    Carrier(
        "anthropic.output_config.format",
        "schema",
        "/v1/messages",
        lambda s: {
            "model": MODEL,
            "messages": CHAT,
            "max_tokens": 2,
            "output_config": {"format": {"type": "json_schema", "schema": s}},
        },
    ),
    Carrier(
        "responses.text.format",
        "schema",
        "/v1/responses",
        lambda s: {
            "model": MODEL,
            "input": "Hi",
            "max_output_tokens": 16,
            "store": False,
            "text": {"format": {"type": "json_schema", "name": "x", "schema": s}},
        },
    ),
]


# Crash inputs that are safe to serve now: each took llama.cpp's time, not its stack or memory.
SERVED = {"two-ways-each-rule", "deep-pattern"}


def crash_inputs(kind: str) -> Iterator[tuple[str, Any]]:
    """The inputs of each kind that crashed, hung or exhausted a worker before issue 71 (each named;
    those in SERVED may be answered, the others are refused)."""
    if kind == "gbnf":
        yield "nested-20k", nested_gbnf(20_000)
        yield "nested-60k", nested_gbnf(60_000)
        yield "max-below-min", 'root ::= "a"{3,2}'
        yield "nullable-left-recursion", 'root ::= b root "x" | "y"\nb ::= "a"*\n'
        yield (
            "rule-chain-60k",
            "root ::= r0\n" + "".join(f"r{n} ::= r{n + 1}\n" for n in range(60_000)) + 'r60000 ::= "x"\n',
        )
        yield (
            "two-ways-each-rule",
            "root ::= r0\n"
            + "".join(f"r{n} ::= r{n + 1} | r{n + 2}\n" for n in range(80))
            + 'r80 ::= "a"\nr81 ::= "b"\n',
        )
    elif kind == "regex":
        yield "nested-20k", nested_regex(20_000)
        yield "nested-40k", nested_regex(40_000)
    elif kind == "lark":
        yield "nested-20k", nested_lark(20_000)
        yield "nested-40k", nested_lark(40_000)
    else:
        yield "ref-chain-20k", ref_chain(20_000)
        yield (
            "long-name",
            {"type": "object", "properties": {"a" * 200_000: {}}, "additionalProperties": {"type": "string"}},
        )
        yield "3000-optional", {"type": "object", "properties": {f"p{n}": {} for n in range(3000)}}
        nested: dict[str, Any] = {"type": "string"}
        for _ in range(800):  # just under the body parser's limit: the bound check recursed (a 500)
            nested = {"type": "array", "items": nested}
        yield "nested-800", nested
        yield "deep-pattern", {"type": "string", "pattern": "^" + "(" * 50_000 + "a" + ")" * 50_000 + "$"}


def _valid_gbnf_expression(rng: random.Random, depth: int) -> str:
    """A GBNF expression that parses: literals, classes, groups nested up to `depth`, repetitions."""
    atoms = ['"a"', '"ab"', "[a-z]", "[^\\x00-\\x1f]", ".", '"\\n"', '"é"', "[0-9]", '""', "ref"]
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(atoms)
    parts = [_valid_gbnf_expression(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    joined = rng.choice([" ", " | "]).join(parts)
    return f"({joined})" + rng.choice(["", "*", "+", "?", "{0,3}", "{2}", "{1,}"])


def random_gbnf(rng: random.Random) -> str:
    """A grammar from the shapes that have broken parsers: deep and wide groups, long rule chains,
    repetitions, ambiguity that multiplies parse stacks, odd escapes; about half of them valid, so that
    llama.cpp's own parser and sampler run them too."""
    pieces = ['"a"', "[a-z]", "[^\\x00]", ".", "<[3]>", "x", "(", ")", "|", "*", "+", "?", "{3,2}",
              "{0,2000}", "{2000}", "\\", '"\\x', "#", "\n", " ", "root", "::=", "\u0000", "\udcff", "é",
              "<|im_end|>"]  # fmt: skip
    shape = rng.random()
    if shape < 0.15:
        depth = rng.choice([10, 150, 199, 201, 1000, 5000])
        return "root ::= " + "(" * depth + rng.choice(pieces) + ")" * rng.choice([depth, depth - 1])
    if shape < 0.3:
        rules = rng.choice([2, 50, 900, 1100, 3000])
        return (
            "root ::= r0\n"
            + "".join(f"r{n} ::= r{n + 1} {rng.choice(pieces[:3])}? | r{n + 2}\n" for n in range(rules))
            + f'r{rules} ::= "x"\nr{rules + 1} ::= "y"\n'
        )
    if shape < 0.4:  # ambiguous: each "a" doubles the parse stacks, until llama.cpp's bound stops the grammar
        return 'root ::= s\ns ::= "a" s x | "a" s y | "b"\nx ::= "c"\ny ::= "c" | "c"\n'
    if shape < 0.75:
        body = " ".join(_valid_gbnf_expression(rng, rng.randint(1, 12)) for _ in range(rng.randint(1, 4)))
        return f'root ::= {body}\nref ::= "r" | ref-2\nref-2 ::= [0-9]+\n'
    return "root ::= " + "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 200)))


def _valid_regex(rng: random.Random, depth: int) -> str:
    atoms = ["a", "[a-z]", "\\d", "\\w", ".", "[^x]", "\\.", "é", "(?:ab)", "[0-9a-f]"]
    if depth <= 0 or rng.random() < 0.3:
        return rng.choice(atoms)
    parts = [_valid_regex(rng, depth - 1) for _ in range(rng.randint(1, 3))]
    joined = rng.choice(["", "|"]).join(parts)
    return f"({joined})" + rng.choice(["", "*", "+", "?", "{0,3}", "{2}", "{1,}", "*?"])


def random_regex(rng: random.Random) -> str:
    pieces = ["(", ")", "(?:", "a", "[a-z]", "*", "+", "?", "{1000}", "{1001}", "|", "\\d", "\\", "^", "$",
              "(?=a)", "\\1", ".", "[^]", "(?i)", "\x00", "\udcff"]  # fmt: skip
    shape = rng.random()
    if shape < 0.2:
        depth = rng.choice([100, 900, 5000, 30_000])
        return "(" * depth + "a" + ")" * depth
    if shape < 0.6:
        return _valid_regex(rng, rng.randint(1, 10))
    return "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 120)))


def random_lark(rng: random.Random) -> str:
    pieces = ["start: ", "a ", "\n", '"x"', "/[a-z]+/", "(", ")", "*", "+", "?", "|", "%ignore ", "A: ",
              "a: ", "start", "~ 5", "~ 1..100000", "{", "}", "\x00"]  # fmt: skip
    shape = rng.random()
    if shape < 0.2:
        depth = rng.choice([100, 900, 5000, 20_000])
        return "start: " + "(" * depth + '"a"' + ")" * depth
    if shape < 0.6:  # a grammar Lark reads: rules over terminals, repeated and left-recursive ones among them

        def alternative(n: int) -> str:
            return f'"{rng.choice("abc")}" r{n + 1}' if n < 5 else f"/{_valid_regex(rng, 3)}/"

        rules = [f"r{n}: " + " | ".join(alternative(n) for _ in range(rng.randint(1, 3))) for n in range(6)]
        return (
            'start: r0 (r0 | NUMBER)* list\nlist: list "," ITEM | ITEM\nITEM: /[a-z]+/\nNUMBER: /[0-9]+/\n'
            + "\n".join(rules)
            + "\n"
        )
    return "start: " + "".join(rng.choice(pieces) for _ in range(rng.randrange(1, 80)))


def random_schema(rng: random.Random) -> Any:
    shape = rng.random()
    if shape < 0.15:
        return ref_chain(rng.choice([10, 1000, 5000, 30_000]))
    if shape < 0.3:
        schema: Any = {"type": "string"}
        for _ in range(rng.choice([5, 99, 101, 500])):
            schema = (
                {"type": "array", "items": schema}
                if rng.random() < 0.5
                else {"anyOf": [schema, {"type": "null"}]}
            )
        return schema
    if shape < 0.45:
        names = [
            "".join(rng.choices(string.ascii_letters + '"\\\u0000é', k=rng.choice([1, 50, 1001])))
            for _ in range(rng.randrange(1, 300))
        ]
        return {
            "type": "object",
            "properties": {n: {"type": "integer"} for n in names},
            "additionalProperties": rng.random() < 0.5,
        }
    if shape < 0.6:
        return {
            "type": "string",
            "pattern": random_regex(rng),
            "minLength": rng.choice([0, 1000, 1001]),
            "maxLength": 2,
        }
    values: list[Any] = [
        {}, [], None, 1, "x", True, {"$ref": "#"}, {"$ref": "#/nope"}, {"type": "bogus"}, {"enum": []},
        {"const": {"a": [1, {}]}}, {"allOf": [{"type": "string"}, {"type": "integer"}]},
        {"type": ["string", "null"], "format": "date-time"}, {"minimum": 1e308, "type": "integer"},
        {"oneOf": [{"$ref": "#"}]}, {"items": {"$ref": "#"}, "type": "array"},
    ]  # fmt: skip
    return rng.choice(values)


GENERATORS: dict[str, Callable[[random.Random], Any]] = {
    "gbnf": random_gbnf,
    "regex": random_regex,
    "lark": random_lark,
    "schema": random_schema,
}
