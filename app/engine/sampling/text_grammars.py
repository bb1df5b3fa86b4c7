"""Grammars for plain-text constraints (vLLM's `regex` and `choice`): GBNF that llama.cpp samples under.

A regular expression is parsed by Python's own parser (`re._parser`, the one `re.compile`
uses), so what is a valid pattern here is what Python says, and its syntax tree becomes GBNF
node by node. The answer must match the whole pattern, as vLLM's structured outputs do; what
a grammar cannot express (back-references, look-arounds, word boundaries, anchors inside the
pattern, case-insensitive matching) is refused by name rather than approximated.
"""

from __future__ import annotations

import json
import re
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from collections.abc import Sequence
from typing import Any

from app.engine.errors import GrammarError

MAX_REPEAT = 1000  # as the JSON schema bounds: past this the grammar explodes
MAX_PATTERN = 1 << 16  # characters of a regular expression
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
    return "root ::= " + regex_expression(pattern)


def regex_expression(pattern: str, json_string: bool = False) -> str:
    """A GBNF expression for text the whole of `pattern` matches; `json_string`: as written inside a
    JSON string (quotes, backslashes and control characters escaped), for a tool's free-form input
    carried in a call's JSON arguments."""
    if len(pattern) > MAX_PATTERN:
        raise GrammarError(
            f"the regular expression is longer than {MAX_PATTERN} characters, the most this server takes"
        )
    try:
        parsed = sre_parse.parse(pattern)
        flags = parsed.state.flags
        if flags & re.IGNORECASE:
            raise GrammarError("case-insensitive matching (the i flag) is not supported")
        items = list(parsed)
        if items and items[0][0] is sre.AT and items[0][1] in _STARTS:
            items = items[1:]
        if items and items[-1][0] is sre.AT and items[-1][1] in _ENDS:
            items = items[:-1]
        return _sequence(items, dotall=bool(flags & re.DOTALL), text=JSON_STRING if json_string else RAW)
    except re.error as exc:
        raise GrammarError(f"this is not a valid regular expression: {exc}") from None
    except RecursionError:  # Python's own parser, and ours, recurse once per group
        raise GrammarError("the regular expression nests its groups too deeply") from None


def char_class(chars: Sequence[str], negated: bool = False) -> str:
    """A GBNF character class of `chars` (or, `negated`, of every other character)."""
    return "[" + ("^" if negated else "") + "".join(_char(ord(c), _CLASS_SPECIAL) for c in chars) + "]"


def literal(text: str) -> str:
    """A GBNF string literal for `text`."""
    return '"' + "".join(_char(ord(c), '"\\') for c in text) + '"'


Ranges = list[tuple[int, int]]


class Text:
    """How characters are written: as themselves (raw text)."""

    def literal(self, text: str) -> str:
        return literal(text)

    def chars(self, ranges: Ranges, negated: bool) -> str:
        """Any one character of `ranges` (or, `negated`, any other)."""
        if negated and not ranges:
            return "[\\U00000000-\\U0010FFFF]"  # any character at all (GBNF has no [^])
        body = "".join(_range(low, high) for low, high in ranges)
        return "[" + ("^" if negated else "") + body + "]"


class JsonStringText(Text):
    """Characters as a JSON string holds them: `"`, `\\` and control characters escaped (`/` may be)."""

    def literal(self, text: str) -> str:
        return literal(json.dumps(text, ensure_ascii=False)[1:-1])

    def chars(self, ranges: Ranges, negated: bool) -> str:
        special = [c for c in _JSON_SPECIAL if any(low <= c <= high for low, high in ranges) != negated]
        if negated:
            plain = "[^" + "".join(_range(low, high) for low, high in [*ranges, *_JSON_SPECIAL_RANGES]) + "]"
        else:
            left = _without(ranges, _JSON_SPECIAL_RANGES)
            plain = "[" + "".join(_range(low, high) for low, high in left) + "]" if left else ""
        escapes = [literal(json.dumps(chr(c))[1:-1]) for c in special]
        if any(low <= ord("/") <= high for low, high in ranges) != negated:
            escapes.append(literal("\\/"))  # JSON may escape a slash too
        options = [option for option in (plain, *escapes) if option]
        if not options:
            raise GrammarError("a character class that matches nothing is not supported")
        return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


_JSON_SPECIAL = [ord('"'), ord("\\"), *range(0x20)]
_JSON_SPECIAL_RANGES = [(0x00, 0x1F), (ord('"'), ord('"')), (ord("\\"), ord("\\"))]
RAW, JSON_STRING = Text(), JsonStringText()


def _without(ranges: Ranges, removed: Ranges) -> Ranges:
    """`ranges` less every character in `removed`."""
    left = list(ranges)
    for low_out, high_out in removed:
        cut: Ranges = []
        for low, high in left:
            if high < low_out or low > high_out:
                cut.append((low, high))
                continue
            if low < low_out:
                cut.append((low, low_out - 1))
            if high > high_out:
                cut.append((high_out + 1, high))
        left = cut
    return left


def _range(low: int, high: int) -> str:
    if low == high:
        return _char(low, _CLASS_SPECIAL)
    return _char(low, _CLASS_SPECIAL) + "-" + _char(high, _CLASS_SPECIAL)


def _sequence(items: Sequence[tuple[Any, Any]], dotall: bool, text: Text) -> str:
    parts: list[str] = []
    pending = ""  # consecutive literal characters, written as one literal
    for op, arg in items:
        if op is sre.LITERAL:
            pending += chr(arg)
            continue
        if pending:
            parts, pending = [*parts, text.literal(pending)], ""
        parts.append(_node(op, arg, dotall, text))
    if pending or not parts:
        parts.append(text.literal(pending))
    return " ".join(parts)


def _node(op: Any, arg: Any, dotall: bool, text: Text) -> str:
    if op is sre.LITERAL:
        return text.literal(chr(arg))
    if op is sre.NOT_LITERAL:
        return text.chars([(arg, arg)], negated=True)
    if op is sre.ANY:
        return text.chars([], negated=True) if dotall else text.chars([(0x0A, 0x0A)], negated=True)
    if op is sre.IN:
        return _class(arg, text)
    if op is sre.BRANCH:
        return "(" + " | ".join(_sequence(list(alt), dotall, text) for alt in arg[1]) + ")"
    if op is sre.SUBPATTERN:
        _group, added, removed, sub = arg
        if added & re.IGNORECASE:
            raise GrammarError("case-insensitive matching (the i flag) is not supported")
        inner_dotall = (dotall or bool(added & re.DOTALL)) and not removed & re.DOTALL
        inner = _sequence(list(sub), inner_dotall, text)
        return inner if len(sub) == 1 and sub[0][0] is sre.BRANCH else f"({inner})"
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, high, sub = arg
        return _repeat(low, high, sub, dotall, text)
    if op is sre.AT:
        raise GrammarError("anchors and word boundaries inside the pattern are not supported")
    if op is sre.ATOMIC_GROUP:
        return "(" + _sequence(list(arg), dotall, text) + ")"
    raise GrammarError(f"{_NAMES.get(op, str(op).lower())} is not supported in a grammar")


_NAMES = {
    sre.GROUPREF: "a back-reference",
    sre.GROUPREF_EXISTS: "a conditional group",
    sre.ASSERT: "a look-ahead or look-behind",
    sre.ASSERT_NOT: "a negative look-ahead or look-behind",
}


def _repeat(low: int, high: int, sub: Any, dotall: bool, text: Text) -> str:
    bounded = high != sre.MAXREPEAT
    if low > MAX_REPEAT or (bounded and high > MAX_REPEAT):
        raise GrammarError(f"a repetition bound above {MAX_REPEAT} is not supported")
    inner = _sequence(list(sub), dotall, text)
    single = len(sub) == 1 and sub[0][0] is not sre.BRANCH and not inner.startswith("(")
    atom = inner if single and " " not in inner else f"({inner})"
    if (low, high) == (0, 1):
        return atom + "?"
    if not bounded:
        return atom + ("*" if low == 0 else "+" if low == 1 else f"{{{low},}}")
    return atom + (f"{{{low}}}" if low == high else f"{{{low},{high}}}")


_CLASS_SPECIAL = "]\\-["
_CATEGORY_RANGES: dict[Any, Ranges] = {
    sre.CATEGORY_DIGIT: [(0x30, 0x39)],
    sre.CATEGORY_WORD: [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    sre.CATEGORY_SPACE: [(0x09, 0x0D), (0x20, 0x20)],
}


def _class(items: Sequence[tuple[Any, Any]], text: Text) -> str:
    negated = bool(items) and items[0][0] is sre.NEGATE
    members = items[1:] if negated else items
    if len(members) == 1 and members[0][0] is sre.CATEGORY and members[0][1] in _NEGATED:
        # \D, \W, \S alone: their positive class negated ([^\D] is \d again).
        return text.chars(_CATEGORY_RANGES[_NEGATED[members[0][1]]], negated=not negated)
    ranges: Ranges = []
    for op, arg in members:
        if op is sre.LITERAL:
            ranges.append((arg, arg))
        elif op is sre.RANGE:
            ranges.append((arg[0], arg[1]))
        elif op is sre.CATEGORY and arg in _CATEGORY_RANGES:
            ranges += _CATEGORY_RANGES[arg]
        else:
            raise GrammarError("a negated class (\\D, \\W, \\S) inside brackets is not supported")
    return text.chars(ranges, negated)


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
