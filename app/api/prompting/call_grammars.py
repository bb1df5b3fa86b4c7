"""Grammars that make an answer calls in its model's own syntax: forced, or woken by a call's first text."""

from __future__ import annotations

from dataclasses import dataclass

from app.chat_formats.base import ChatFormat, Function
from app.engine import grammar


@dataclass(frozen=True)
class CallGrammar:
    """GBNF for the answer's calls; `triggers` set means lazy: free text until one matches."""

    gbnf: str
    triggers: tuple[str, ...] = ()


def calls_grammar(fmt: ChatFormat, functions: list[Function], parallel: bool, lazy: bool) -> CallGrammar:
    """The calls of `functions` as `fmt` writes them (GrammarError for a schema it cannot follow)."""
    names = [f"fn{position}-args" for position in range(len(functions))]
    rules = grammar.schema_rules(
        {name: f.parameters or {"type": "object"} for name, f in zip(names, functions, strict=True)}
    )
    root = f"root ::= {fmt.call_rule(functions, names, parallel)}\n"
    return CallGrammar(root + rules, tuple(fmt.trigger_patterns(tuple(functions))) if lazy else ())
