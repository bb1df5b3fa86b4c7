"""Lark grammars as GBNF: a custom tool's input held to the grammar it declares, by llama.cpp's sampler.

OpenAI's custom tools take free-form input, and may give its grammar in Lark's syntax
(Codex's `apply_patch`): `format: {"type": "grammar", "syntax": "lark", "definition"}`.
The definition is read by Lark itself, which compiles it to plain rules (its `?`, `*`, `+`
and groups expanded into rules of their own) and terminals (strings and regular
expressions). Those become GBNF rule by rule: Lark's repetition rules are left-recursive,
which llama.cpp's grammars cannot be, so each `A: A x | y` is written `A ::= y x*`; its
regular expressions go through the regex converter (text_grammars.py); `%ignore`d
terminals may come between any two symbols, as Lark's lexer skips them. The input is
written inside a JSON string (the call's arguments), so every character is constrained as
JSON escapes it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from app.engine.errors import GrammarError
from app.engine.sampling.text_grammars import JSON_STRING, RAW, regex_expression

MAX_DEFINITION = 1 << 16  # characters of a Lark grammar


def lark_rules(definition: str, root: str, json_string: bool = True) -> str:
    """GBNF rules for text the grammar's `start` rule accepts, that rule named `root` and the others
    after it; GrammarError for a definition Lark cannot read or GBNF cannot say."""
    from lark.exceptions import LarkError  # imported by the first custom tool, not at every start
    from lark.lexer import PatternStr
    from lark.load_grammar import GrammarBuilder

    if len(definition) > MAX_DEFINITION:
        raise GrammarError(
            f"the Lark grammar is longer than {MAX_DEFINITION} characters, the most this server takes"
        )
    try:
        builder = GrammarBuilder()
        builder.load_grammar(definition)
        terminals, rules, ignored = builder.build().compile(["start"], set())
    except LarkError as exc:
        raise GrammarError(f"the Lark grammar cannot be read: {_one_line(exc)}") from None
    except RecursionError:  # Lark's tree transformations recurse once per nested group
        raise GrammarError("the Lark grammar nests its groups too deeply") from None
    text = JSON_STRING if json_string else RAW
    lines = []
    for terminal in terminals:
        pattern = terminal.pattern
        flags = "".join(pattern.flags)
        if "i" in flags:
            raise GrammarError(f"terminal {terminal.name}: case-insensitive matching is not supported")
        if isinstance(pattern, PatternStr):
            expression = text.literal(pattern.value)
        else:
            expression = regex_expression((f"(?{flags})" if flags else "") + pattern.value, json_string)
        lines.append(f"{root}-t-{_name(terminal.name)} ::= {expression}")
    gap = f" {root}-ignored " if ignored else " "
    if ignored:
        names = " | ".join(f"{root}-t-{_name(name)}" for name in ignored)
        lines.append(f"{root}-ignored ::= ({names})*")
    expansions: dict[str, list[list[str]]] = defaultdict(list)
    for rule in rules:
        symbols = [f"{root}-{'t' if s.is_term else 'r'}-{_name(s.name)}" for s in rule.expansion]
        expansions[f"{root}-r-{_name(rule.origin.name)}"].append(symbols)
    for name, alternatives in expansions.items():
        lines.append(f"{name} ::= {_without_left_recursion(name, alternatives, gap)}")
    start = f"{root} ::={gap}{root}-r-start{gap if ignored else ''}".rstrip()
    return "\n".join([start, *lines]) + "\n"


def _without_left_recursion(name: str, alternatives: list[list[str]], gap: str) -> str:
    """`A ::= A x | y` as `A ::= y (x)*`: the same language, as llama.cpp's grammars must have it."""
    recursive = [a[1:] for a in alternatives if a and a[0] == name]
    plain = [a for a in alternatives if not a or a[0] != name]
    if not plain:
        raise GrammarError("a rule that only ever refers to itself first is not supported")
    head = _alternatives(plain, gap)
    if not recursive:
        return head
    return f"({head}) ({_alternatives(recursive, gap)})*"


def _alternatives(alternatives: list[list[str]], gap: str) -> str:
    written = [gap.join(symbols).strip() for symbols in alternatives if symbols]
    body = " | ".join(written)
    if len(written) < len(alternatives):  # one of them is empty
        return f"({body})?"
    return body


def _name(lark_name: str) -> str:
    """A Lark rule or terminal name as a GBNF one (letters, digits and dashes)."""
    return lark_name.lower().replace("_", "-")


def _one_line(exc: Any) -> str:
    return " ".join(str(exc).split())[:300]
