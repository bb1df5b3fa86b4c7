"""Grammars that make an answer calls in its model's own syntax: forced, or woken by a call's first text."""

from __future__ import annotations

from dataclasses import dataclass

from app.chat_formats.base import ChatFormat, Function
from app.engine.sampling import grammar, lark_grammars, text_grammars

CUSTOM_INPUT = "input"  # a custom tool's one argument: its free-form input (responses/tool_kinds.py)


@dataclass(frozen=True)
class CallGrammar:
    """GBNF for the answer's calls; `triggers` set means lazy: free text until one matches."""

    gbnf: str
    triggers: tuple[str, ...] = ()


def calls_grammar(fmt: ChatFormat, functions: list[Function], parallel: bool, lazy: bool) -> CallGrammar:
    """The calls of `functions` as `fmt` writes them (GrammarError for a schema it cannot follow)."""
    names = [f"fn{position}-args" for position in range(len(functions))]
    # A size bound past the server's is left out of a tool's grammar, not refused: agents' tools say
    # `maxLength: 524288` for "any length" (Claude Code's), which no grammar could spell out.
    schemas = {name: grammar.without_large_bounds(f.parameters or {"type": "object"})
               for name, f in zip(names, functions, strict=True) if f.input_format is None}  # fmt: skip
    rules = grammar.schema_rules(schemas) if schemas else ""
    for name, function in zip(names, functions, strict=True):
        if function.input_format is not None:
            rules += _input_rules(name, *function.input_format)
    root = f"root ::= {fmt.call_rule(functions, names, parallel)}\n"
    return CallGrammar(root + rules, tuple(fmt.trigger_patterns(tuple(functions))) if lazy else ())


def _input_rules(name: str, syntax: str, definition: str) -> str:
    """Arguments {"input": "<text the grammar accepts, JSON-escaped>"}, for a custom tool's call."""
    text = f"{name}-in"
    if syntax == "lark":
        body = lark_grammars.lark_rules(definition, text)
    else:
        body = f"{text} ::= {text_grammars.regex_expression(definition, json_string=True)}\n"
    gap = "[ ]?"
    opening = f'"{{" {gap} "\\"{CUSTOM_INPUT}\\"" {gap} ":" {gap} "\\""'
    return f'{name} ::= {opening} {text} "\\"" {gap} "}}"\n' + body
