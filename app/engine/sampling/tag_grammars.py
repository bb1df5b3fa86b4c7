"""vLLM's structural tags as GBNF: free text, where a trigger may only open one of the tagged structures.

A structural tag (xgrammar's, which vLLM's `structured_outputs.structural_tag` takes) lists
structures `{begin, schema, end}` and triggers: the answer is free text, but wherever a
trigger appears it must be the start of some structure's `begin`, followed by JSON that
follows its schema and then its `end`; after that, free text again. The free text is the
language of strings containing no trigger, written as GBNF from the triggers' Aho-Corasick
automaton (one rule per state; a step that would complete a trigger has no rule), so the
grammar allows exactly what xgrammar's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.engine.errors import GrammarError
from app.engine.sampling import grammar
from app.engine.sampling.text_grammars import char_class, literal


@dataclass(frozen=True)
class TaggedStructure:
    """Text `begin`, then JSON following `schema`, then text `end`."""

    begin: str
    schema: Any
    end: str


def structural_tag_grammar(structures: Sequence[TaggedStructure], triggers: Sequence[str]) -> str:
    """GBNF for free text whose triggers each open one of `structures`."""
    check_triggers(triggers)
    for structure in structures:
        if not any(structure.begin.startswith(trigger) for trigger in triggers):
            raise GrammarError(f"the begin {structure.begin!r} starts with none of the triggers")
    rules = _schema_rules({f"tag-{n}": structure.schema for n, structure in enumerate(structures)})
    structs = [
        f"struct-{n} ::= {literal(s.begin)} tag-{n} {literal(s.end)}" for n, s in enumerate(structures)
    ]
    begins = [structure.begin for structure in structures]
    return "\n".join(["root ::= free-0", *_free_text_rules(triggers, begins), *structs, rules])


def _schema_rules(schemas: dict[str, Any]) -> str:
    """One rule per schema, named by its key. llama.cpp's converter names a bare primitive schema
    ({"type": "integer"}) by its primitive's rule, not by the key: those are asked again as the one
    alternative of an anyOf, which it names by the key."""
    rules = grammar.schema_rules(schemas)
    missing = {name for name in schemas if f"\n{name} ::=" not in "\n" + rules}
    if missing:
        wrapped = {
            name: {"anyOf": [schema]} if name in missing else schema for name, schema in schemas.items()
        }
        rules = grammar.schema_rules(wrapped)
    return rules


def _free_text_rules(triggers: Sequence[str], begins: Sequence[str]) -> list[str]:
    """Rules free-N, one per state of the triggers' automaton that has not completed one (free-0: the
    start): each allows ending there, one more character that completes no trigger, or a structure
    whose begin, read from there, fires the trigger it starts with (as the scan would: the text
    before it must not join its first characters into another trigger)."""
    goto, ends = _automaton(triggers)
    alphabet = sorted({c for trigger in triggers for c in trigger})
    fired = [_fires(goto, ends, 0, begin) for begin in begins]
    rules = []
    for state in range(len(goto)):
        if ends[state]:
            continue
        steps = [f"{char_class(alphabet, negated=True)} free-0"]
        steps += [f"{literal(c)} free-{goto[state][c]}" for c in alphabet if not ends[goto[state][c]]]
        steps += [
            f"struct-{n} free-0"
            for n, begin in enumerate(begins)
            if _fires(goto, ends, state, begin) == fired[n]
        ]
        rules.append(f"free-{state} ::= ( {' | '.join(steps)} )?")
    return rules


def _fires(goto: list[dict[str, int]], ends: list[bool], state: int, begin: str) -> tuple[int, int] | None:
    """Reading `begin` from `state`: where a trigger first completes, and the automaton's state there."""
    for at, c in enumerate(begin):
        state = goto[state].get(c, 0)
        if ends[state]:
            return at, state
    return None


def _automaton(triggers: Sequence[str]) -> tuple[list[dict[str, int]], list[bool]]:
    """The Aho-Corasick automaton of `triggers`, its transitions completed over their characters:
    (for each state, the state each character leads to; whether a state has seen a whole trigger)."""
    children: list[dict[str, int]] = [{}]
    ends = [False]
    for trigger in triggers:
        state = 0
        for c in trigger:
            if c not in children[state]:
                children.append({})
                ends.append(False)
                children[state][c] = len(children) - 1
            state = children[state][c]
        ends[state] = True
    alphabet = {c for trigger in triggers for c in trigger}
    goto: list[dict[str, int]] = [{} for _ in children]
    fail = [0] * len(children)
    order = [0]
    for c in alphabet:  # the root: a character that starts no trigger stays there
        goto[0][c] = children[0].get(c, 0)
    for state in order:  # breadth first, so a state's fail state is done before it
        for c, child in children[state].items():
            if state != 0:
                fail[child] = goto[fail[state]][c]
            ends[child] = ends[child] or ends[fail[child]]
            order.append(child)
        if state != 0:
            for c in alphabet:
                goto[state][c] = children[state].get(c, goto[fail[state]][c])
    return goto, ends


def check_triggers(triggers: Sequence[str]) -> None:
    """Refuse triggers the automaton cannot take (empty ones match everywhere)."""
    if not triggers or any(not trigger for trigger in triggers):
        raise GrammarError("triggers must be non-empty strings")
