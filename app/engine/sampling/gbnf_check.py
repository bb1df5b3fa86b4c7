"""GBNF read as llama.cpp's parser reads it, within bounds: a grammar is refused here, with the reason,
before any byte of it reaches src/llama-grammar.cpp (which recurses once per group, and has crashed on
20,000 of them).

The parser follows llama_grammar_parser's own steps (parse_space, parse_sequence, handle_repetitions,
the rule checks in parse and llama_grammar_init_impl, the left-recursion walk), so that within the
bounds below a grammar is accepted here exactly when llama.cpp accepts it (tests/unit compare the two
on generated grammars). Rules are kept as alternatives of items: a rule reference (its id, >= 0) or a
run of terminal elements (minus how many: -3 for a three-character literal), which is all the checks
need. Past llama.cpp's own checks it refuses one thing more: a rule that reaches itself before any
character through rules that may match nothing, leaving something to match after it: llama.cpp's
stack advance never ends on those (its left-recursion check counts only alternatives that are empty
as written).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from app.engine.errors import GrammarError

MAX_BYTES = 1 << 20  # the grammar's text
MAX_NESTING = 200  # groups inside groups (llama.cpp's stack: grammar-bounds.patch stops at 1000)
MAX_ELEMENTS = 1 << 20  # llama.cpp's elements, after {m,n} copies (the patch: 1 << 24)
MAX_RULES = 1 << 16  # rules, those {m,n} and groups make included
MAX_RULE_CHAIN = 1000  # leftmost references the left-recursion walk follows (the patch: 4096)
MAX_REPETITION = 2000  # llama.cpp's MAX_REPETITION_THRESHOLD
_UINT64 = (1 << 64) - 1

_SPACE = re.compile(r"(?:[ \t]|#[^\r\n\0]*)*")
_SPACE_NEWLINES = re.compile(r"(?:[ \t\r\n]|#[^\r\n\0]*)*")
_NAME = re.compile(r"[a-zA-Z0-9-]+")
_INT = re.compile(r"[0-9]+")
# One character inside a literal or a class, as parse_char reads it (an escape or any other character).
_CHAR = r"(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[trn\\\"\[\]\-])|[^\\\0])"
_LITERAL = re.compile(rf'(?>(?:(?!"){_CHAR})*)"')
_CLASS = re.compile(rf"(?>(?:(?!\]){_CHAR}(?:-(?![\]\0]){_CHAR})?)*)\]")
_ONE_CHAR = re.compile(_CHAR)
_TOKEN_ID = re.compile(r"<\[([0-9]+)\]>")
_TOKEN_PIECE = re.compile(r"<[^>\0]*>")

TokenOf = Callable[[str], int | None]  # a `<piece>`'s token, if it is exactly one of the vocabulary


def check(text: str, token_of: TokenOf | None = None) -> None:
    """Refuse (GrammarError) a grammar llama.cpp would refuse, or one past this server's bounds."""
    if not text:
        return  # llama.cpp's sampler for an empty grammar constrains nothing: no grammar at all
    if "\0" in text:
        raise GrammarError("the grammar contains a NUL character")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise GrammarError(f"the grammar is longer than {MAX_BYTES} bytes, the most this server takes")
    parser = _Parser(text + "\0", token_of)
    try:
        parser.parse()
    except RecursionError:  # only if the interpreter's stack is far shallower than MAX_NESTING needs
        raise GrammarError(
            f"the grammar nests more than the {MAX_NESTING} groups this server takes"
        ) from None
    parser.check_rules()
    _check_left_recursion(parser.rules)


class _Parser:
    """llama_grammar_parser, over text ending in a NUL as the C string does."""

    def __init__(self, text: str, token_of: TokenOf | None) -> None:
        self.text = text
        self.token_of = token_of
        self.symbol_ids: dict[str, int] = {}
        self.rules: dict[int, list[list[int]]] = {}
        self.elements = 0
        self.depth = 0

    def fail(self, message: str, pos: int) -> GrammarError:
        near = self.text[pos : pos + 30].rstrip("\0")
        return GrammarError(f"the grammar cannot be parsed: {message} at {near!r}" if near else message)

    def space(self, pos: int, newlines: bool) -> int:
        found = (_SPACE_NEWLINES if newlines else _SPACE).match(self.text, pos)
        return found.end() if found else pos

    def symbol(self, name: str) -> int:
        return self.symbol_ids.setdefault(name, len(self.symbol_ids))

    def generated_symbol(self, base: str) -> int:
        next_id = len(self.symbol_ids)
        self.symbol_ids[f"{base}_{next_id}"] = next_id
        return next_id

    def add_rule(self, rule_id: int, alternatives: list[list[int]]) -> None:
        self.elements += _size(alternatives)
        if self.elements > MAX_ELEMENTS:
            raise GrammarError(
                f"the grammar expands to more than {MAX_ELEMENTS} elements, the most this server takes"
            )
        if len(self.symbol_ids) > MAX_RULES:
            raise GrammarError(f"the grammar makes more than {MAX_RULES} rules, the most this server takes")
        self.rules[rule_id] = alternatives

    def parse(self) -> None:
        pos = self.space(0, True)
        while self.text[pos] != "\0":
            pos = self.parse_rule(pos)

    def parse_rule(self, pos: int) -> int:
        name = _NAME.match(self.text, pos)
        if name is None:
            raise self.fail("expecting name", pos)
        rule_id = self.symbol(name.group())
        pos = self.space(name.end(), False)
        if not self.text.startswith("::=", pos):
            raise self.fail("expecting ::=", pos)
        pos = self.parse_alternates(self.space(pos + 3, True), name.group(), rule_id, False)
        if self.text.startswith("\r\n", pos):
            pos += 2
        elif self.text[pos] in "\r\n":
            pos += 1
        elif self.text[pos] != "\0":
            raise self.fail("expecting newline or end", pos)
        return self.space(pos, True)

    def parse_alternates(self, pos: int, rule_name: str, rule_id: int, nested: bool) -> int:
        alternatives = [[]]  # type: list[list[int]]
        pos = self.parse_sequence(pos, rule_name, alternatives[-1], nested)
        while self.text[pos] == "|":
            alternatives.append([])
            pos = self.parse_sequence(self.space(pos + 1, True), rule_name, alternatives[-1], nested)
        self.add_rule(rule_id, alternatives)
        return pos

    def parse_sequence(self, pos: int, rule_name: str, seq: list[int], nested: bool) -> int:
        text = self.text
        last = len(seq)
        n_prev_rules = 1
        while (c := text[pos]) != "\0":
            if c == '"' or c == "[":
                body = (_LITERAL if c == '"' else _CLASS).match(
                    text, pos + 1 + (text[pos + 1] == "^" and c == "[")
                )
                if body is None:
                    raise self.fail("unexpected end of input or unknown escape", pos)
                count = len(_ONE_CHAR.findall(body.group()[:-1]))
                last, n_prev_rules = len(seq), 1
                if count:
                    seq.append(-count)
                pos = self.space(body.end(), nested)
            elif c == "<" or c == "!":
                pos = self.parse_token(pos + (c == "!"))
                last, n_prev_rules = len(seq), 1
                seq.append(-1)
                pos = self.space(pos, nested)
            elif (name := _NAME.match(text, pos)) is not None:
                last, n_prev_rules = len(seq), 1
                seq.append(self.symbol(name.group()))
                pos = self.space(name.end(), nested)
            elif c == "(":
                pos = self.space(pos + 1, True)
                before = len(self.symbol_ids)
                sub_rule = self.generated_symbol(rule_name)
                self.depth += 1
                if self.depth > MAX_NESTING:
                    raise GrammarError(
                        f"the grammar nests more than the {MAX_NESTING} groups this server takes"
                    )
                pos = self.parse_alternates(pos, rule_name, sub_rule, True)
                self.depth -= 1
                n_prev_rules = max(1, len(self.symbol_ids) - before)
                last = len(seq)
                seq.append(sub_rule)
                if text[pos] != ")":
                    raise self.fail("expecting ')'", pos)
                pos = self.space(pos + 1, nested)
            elif c == ".":
                last, n_prev_rules = len(seq), 1
                seq.append(-1)
                pos = self.space(pos + 1, nested)
            elif c in "*+?":
                pos = self.space(pos + 1, nested)
                low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                n_prev_rules = self.repeat(seq, last, low, high, n_prev_rules, rule_name, pos)
            elif c == "{":
                pos, low, high = self.parse_braces(pos, nested)
                n_prev_rules = self.repeat(seq, last, low, high, n_prev_rules, rule_name, pos)
            else:
                break
        return pos

    def parse_token(self, pos: int) -> int:
        if self.text.startswith("<[", pos):
            found = _TOKEN_ID.match(self.text, pos)
            if found is None:
                raise self.fail("expecting a token id <[N]>", pos)
            if int(found.group(1)) > 0xFFFFFFFF:
                raise self.fail("token id is too big", pos)
            return found.end()
        found = _TOKEN_PIECE.match(self.text, pos)
        if found is None:
            raise self.fail("expecting a token <...>", pos)
        if self.token_of is None or self.token_of(found.group()) is None:
            raise self.fail("not exactly one token of this model's vocabulary", pos)
        return found.end()

    def parse_braces(self, pos: int, nested: bool) -> tuple[int, int, int | None]:
        start = self.space(pos + 1, nested)
        low_text = _INT.match(self.text, start)
        if low_text is None:
            raise self.fail("expecting an int", start)
        low = self.uint64(low_text.group(), start)
        pos = self.space(low_text.end(), nested)
        high: int | None
        if self.text[pos] == "}":
            high = low
        elif self.text[pos] == ",":
            pos = self.space(pos + 1, nested)
            high = None
            if (high_text := _INT.match(self.text, pos)) is not None:
                high = self.uint64(high_text.group(), pos)
                pos = self.space(high_text.end(), nested)
            if self.text[pos] != "}":
                raise self.fail("expecting '}'", pos)
        else:
            raise self.fail("expecting ','", pos)
        if low > MAX_REPETITION:
            raise GrammarError(f"a repetition of {low} is more than llama.cpp's {MAX_REPETITION}")
        if high is not None and high > MAX_REPETITION:
            high = None  # as llama.cpp: no upper bound
        return self.space(pos + 1, nested), low, high

    def repeat(
        self,
        seq: list[int],
        last: int,
        low: int,
        high: int | None,
        n_prev_rules: int,
        rule_name: str,
        pos: int,
    ) -> int:
        """handle_repetitions: S{m,n} as m copies of S and n-m optional ones, each a rule of its own."""
        if last == len(seq):
            raise self.fail("expecting preceding item to */+/?/{", pos)
        if high is not None and high < low:
            raise GrammarError(f"a repetition {{{low},{high}}} has its maximum below its minimum")
        prev = seq[last:]
        total = high if high else low if low else 1
        if n_prev_rules * total > MAX_REPETITION:
            raise GrammarError("the grammar repeats too many rules (llama.cpp takes at most 2000 copies)")
        size = _size([prev]) - 1
        if self.elements + (max(low, high or 1) + 1) * (size + 2) > MAX_ELEMENTS:
            raise GrammarError(
                f"the grammar expands to more than {MAX_ELEMENTS} elements, the most this server takes"
            )
        if low == 0:
            del seq[last:]
        else:
            seq.extend(prev * (low - 1))
        last_rec = 0
        for i in range(1 if high is None else high - low):
            rec = self.generated_symbol(rule_name)
            self.add_rule(
                rec, [[*prev, rec if high is None else last_rec] if i > 0 or high is None else prev, []]
            )
            last_rec = rec
        if high is None or high > low:
            seq.append(last_rec)
        return n_prev_rules * total

    def uint64(self, digits: str, pos: int) -> int:
        value = int(digits)
        if value > _UINT64:  # std::stoull's out_of_range
            raise self.fail("number too large", pos)
        return value

    def check_rules(self) -> None:
        """parse's checks (no rule left undefined below the highest defined, none referred to undefined)
        and llama_grammar_init_impl's (some rule, and a root)."""
        if not self.rules:
            raise GrammarError("the grammar has no rules")
        names = {rule_id: name for name, rule_id in self.symbol_ids.items()}
        for rule_id in range(max(self.rules) + 1):
            if rule_id not in self.rules:
                raise GrammarError(f"the grammar uses the rule '{names[rule_id]}' but never defines it")
        for alternatives in self.rules.values():
            for alternative in alternatives:
                for item in alternative:
                    if item >= 0 and item not in self.rules:
                        raise GrammarError(f"the grammar uses the rule '{names[item]}' but never defines it")
        if "root" not in self.symbol_ids:
            raise GrammarError("the grammar has no 'root' rule")


def _size(alternatives: list[list[int]]) -> int:
    """llama.cpp's elements for a rule: each item's, an ALT between alternatives, an END."""
    return sum(-item if item < 0 else 1 for alternative in alternatives for item in alternative) + len(
        alternatives
    )


Rules = dict[int, list[list[int]]]


def _check_left_recursion(rules: Rules) -> None:
    """llama_grammar_detect_left_recursion's verdict, walked as it walks (rule by rule in id order,
    depth first), then the one llama.cpp does not make: a rule reached again, leftmost, through rules
    that may match nothing, with something after it to match."""
    written_empty = {rule_id: any(not alternative for alternative in alts) for rule_id, alts in rules.items()}
    if _has_cycle(rules, lambda rule_id: written_empty[rule_id], chain_limit=MAX_RULE_CHAIN):
        raise GrammarError("the grammar is left-recursive (a rule can reach itself before any character)")
    nullable = _nullable(rules)
    leftmost = {rule_id: _leftmost(alts, nullable.__contains__) for rule_id, alts in rules.items()}
    for component in _components(
        {rule_id: [target for target, _ in edges] for rule_id, edges in leftmost.items()}
    ):
        for rule_id in component:
            if any(grows and target in component for target, grows in leftmost[rule_id]):
                raise GrammarError(
                    "the grammar is left-recursive (a rule can reach itself before any character, "
                    "through rules that may match nothing)"
                )


def _leftmost(alternatives: list[list[int]], may_be_empty: Callable[[int], bool]) -> list[tuple[int, bool]]:
    """The rules an alternative may begin with (those after rules that may match nothing, too), each
    with whether something follows it in its alternative."""
    found = []
    for alternative in alternatives:
        for at, item in enumerate(alternative):
            if item < 0:
                break
            found.append((item, at < len(alternative) - 1))
            if not may_be_empty(item):
                break
    return found


def _has_cycle(rules: Rules, may_be_empty: Callable[[int], bool], chain_limit: int) -> bool:
    """Depth first over leftmost references, in llama.cpp's order; a chain past `chain_limit` refused."""
    in_progress: set[int] = set()
    visited: set[int] = set()
    for start in sorted(rules):
        if start in visited:
            continue
        stack = [(start, iter(_leftmost(rules[start], may_be_empty)))]
        in_progress.add(start)
        while stack:
            rule_id, edges = stack[-1]
            for target, _grows in edges:
                if target in in_progress:
                    return True
                if target in visited:
                    continue
                if len(stack) > chain_limit:
                    raise GrammarError(
                        f"the grammar chains more than {chain_limit} rules before any character, "
                        "the most this server takes"
                    )
                in_progress.add(target)
                stack.append((target, iter(_leftmost(rules[target], may_be_empty))))
                break
            else:
                stack.pop()
                in_progress.discard(rule_id)
                visited.add(rule_id)
    return False


def _nullable(rules: Rules) -> set[int]:
    """The rules that may match the empty text: those with an alternative of such rules alone (worked
    out from the rules written empty, in time linear in the grammar)."""
    waiting: dict[tuple[int, int], set[int]] = {}  # an alternative of rule refs alone: those not yet nullable
    places: dict[int, list[tuple[int, int]]] = {}  # where each rule is referred to by such an alternative
    ready = []
    for rule_id, alternatives in rules.items():
        for number, alternative in enumerate(alternatives):
            if any(item < 0 for item in alternative):
                continue
            waiting[rule_id, number] = set(alternative)
            for item in waiting[rule_id, number]:
                places.setdefault(item, []).append((rule_id, number))
            if not alternative:
                ready.append(rule_id)
    nullable: set[int] = set()
    while ready:
        rule_id = ready.pop()
        if rule_id in nullable:
            continue
        nullable.add(rule_id)
        for owner, number in places.get(rule_id, ()):
            waiting[owner, number].discard(rule_id)
            if not waiting[owner, number]:
                ready.append(owner)
    return nullable


def _components(graph: dict[int, list[int]]) -> list[set[int]]:
    """The strongly connected components of `graph` (Tarjan's, without recursion)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    found: list[set[int]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    found.append(component)
    return found
