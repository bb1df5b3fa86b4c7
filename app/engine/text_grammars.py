"""Grammars for plain-text constraints (vLLM's `regex` and `choice`): GBNF that llama.cpp samples under.

A regular expression is parsed by Python's own parser (`re._parser`, the one `re.compile`
uses), so what is a valid pattern here is what Python says, and its syntax tree becomes GBNF
node by node. The answer must match the whole pattern, as vLLM's structured outputs do; what
a grammar cannot express (back-references, look-arounds, word boundaries, anchors inside the
pattern, case-insensitive matching) is refused by name rather than approximated.
"""

from __future__ import annotations

import re
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Sequence
from typing import Any

from app.engine.errors import GrammarError

MAX_REPEAT = 1000  # as the JSON schema bounds: past this the grammar explodes
_CLASSES = {
    sre.CATEGORY_DIGIT: "0-9",
    sre.CATEGORY_WORD: "a-zA-Z0-9_",
    sre.CATEGORY_SPACE: " \\t\\n\\r\\x0B\\x0C",
}
_NEGATED = {
    sre.CATEGORY_NOT_DIGIT: sre.CATEGORY_DIGIT,
    sre.CATEGORY_NOT_WORD: sre.CATEGORY_WORD,
    sre.CATEGORY_NOT_SPACE: sre.CATEGORY_SPACE,
}
_STARTS = (sre.AT_BEGINNING, sre.AT_BEGINNING_STRING)
_ENDS = (sre.AT_END, sre.AT_END_STRING)


def choice_grammar(choices: Sequence[str]) -> str:
    """GBNF for exactly one of `choices`."""
    return "root ::= " + " | ".join(literal(choice) for choice in choices)


def regex_grammar(pattern: str) -> str:
    """GBNF for text that the whole of `pattern` matches; GrammarError for what GBNF cannot say."""
    try:
        parsed = sre_parse.parse(pattern)
    except re.error as exc:
        raise GrammarError(f"this is not a valid regular expression: {exc}") from None
    flags = parsed.state.flags
    if flags & re.IGNORECASE:
        raise GrammarError("case-insensitive matching (the i flag) is not supported")
    items = list(parsed)
    if items and items[0][0] is sre.AT and items[0][1] in _STARTS:
        items = items[1:]
    if items and items[-1][0] is sre.AT and items[-1][1] in _ENDS:
        items = items[:-1]
    return "root ::= " + _sequence(items, dotall=bool(flags & re.DOTALL))


def char_class(chars: Sequence[str], negated: bool = False) -> str:
    """A GBNF character class of `chars` (or, `negated`, of every other character)."""
    return "[" + ("^" if negated else "") + "".join(_char(ord(c), _CLASS_SPECIAL) for c in chars) + "]"


def literal(text: str) -> str:
    """A GBNF string literal for `text`."""
    return '"' + "".join(_char(ord(c), '"\\') for c in text) + '"'


def _sequence(items: Sequence[tuple[Any, Any]], dotall: bool) -> str:
    parts: list[str] = []
    text = ""  # consecutive literal characters, written as one literal
    for op, arg in items:
        if op is sre.LITERAL:
            text += chr(arg)
            continue
        if text:
            parts, text = [*parts, literal(text)], ""
        parts.append(_node(op, arg, dotall))
    if text or not parts:
        parts.append(literal(text))
    return " ".join(parts)


def _node(op: Any, arg: Any, dotall: bool) -> str:
    if op is sre.LITERAL:
        return literal(chr(arg))
    if op is sre.NOT_LITERAL:
        return f"[^{_char(arg, _CLASS_SPECIAL)}]"
    if op is sre.ANY:
        return "[\\U00000000-\\U0010FFFF]" if dotall else "[^\\n]"
    if op is sre.IN:
        return _class(arg)
    if op is sre.BRANCH:
        return "(" + " | ".join(_sequence(list(alt), dotall) for alt in arg[1]) + ")"
    if op is sre.SUBPATTERN:
        _group, added, removed, sub = arg
        if added & re.IGNORECASE:
            raise GrammarError("case-insensitive matching (the i flag) is not supported")
        inner_dotall = (dotall or bool(added & re.DOTALL)) and not removed & re.DOTALL
        inner = _sequence(list(sub), inner_dotall)
        return inner if len(sub) == 1 and sub[0][0] is sre.BRANCH else f"({inner})"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, high, sub = arg
        return _repeat(low, high, sub, dotall)
    if op is sre.AT:
        raise GrammarError("anchors and word boundaries inside the pattern are not supported")
    if op is sre.ATOMIC_GROUP:
        return "(" + _sequence(list(arg), dotall) + ")"
    raise GrammarError(f"{_NAMES.get(op, str(op).lower())} is not supported in a grammar")


_NAMES = {
    sre.GROUPREF: "a back-reference",
    sre.GROUPREF_EXISTS: "a conditional group",
    sre.ASSERT: "a look-ahead or look-behind",
    sre.ASSERT_NOT: "a negative look-ahead or look-behind",
}


def _repeat(low: int, high: int, sub: Any, dotall: bool) -> str:
    bounded = high != sre.MAXREPEAT
    if low > MAX_REPEAT or (bounded and high > MAX_REPEAT):
        raise GrammarError(f"a repetition bound above {MAX_REPEAT} is not supported")
    inner = _sequence(list(sub), dotall)
    atom = inner if len(sub) == 1 and sub[0][0] is not sre.BRANCH else f"({inner})"
    if (low, high) == (0, 1):
        return atom + "?"
    if not bounded:
        return atom + ("*" if low == 0 else "+" if low == 1 else f"{{{low},}}")
    return atom + (f"{{{low}}}" if low == high else f"{{{low},{high}}}")


_CLASS_SPECIAL = "]\\-["


def _class(items: Sequence[tuple[Any, Any]]) -> str:
    negated = bool(items) and items[0][0] is sre.NEGATE
    members = items[1:] if negated else items
    if len(members) == 1 and members[0][0] is sre.CATEGORY and members[0][1] in _NEGATED:
        # \D, \W, \S alone: their positive class negated ([^\D] is \d again).
        positive = _CLASSES[_NEGATED[members[0][1]]]
        return f"[{positive}]" if negated else f"[^{positive}]"
    body = []
    for op, arg in members:
        if op is sre.LITERAL:
            body.append(_char(arg, _CLASS_SPECIAL))
        elif op is sre.RANGE:
            body.append(_char(arg[0], _CLASS_SPECIAL) + "-" + _char(arg[1], _CLASS_SPECIAL))
        elif op is sre.CATEGORY and arg in _CLASSES:
            body.append(_CLASSES[arg])
        else:
            raise GrammarError("a negated class (\\D, \\W, \\S) inside brackets is not supported")
    return "[" + ("^" if negated else "") + "".join(body) + "]"


def _char(code: int, special: str) -> str:
    """One character inside a GBNF literal or class: escaped where GBNF would read it otherwise."""
    c = chr(code)
    if c in special:
        return "\\" + c
    if c.isprintable() and c != "^":  # GBNF has no \^, and a class's first ^ negates it
        return c
    if code <= 0xFF:
        return f"\\x{code:02X}"
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    return f"\\U{code:08X}"
