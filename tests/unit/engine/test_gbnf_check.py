"""The GBNF check: llama.cpp's acceptance within the bounds (compared with llama.cpp itself on generated
grammars), and every input that crashed, hung or exhausted llama.cpp refused with its reason."""

from __future__ import annotations

import llama_cpp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.engine.errors import GrammarError
from app.engine.sampling import gbnf_check, grammar, text_grammars


def llama_accepts(text: str) -> bool:
    """Whether llama.cpp (this build, with deploy/llama-cpp/patches) builds a sampler for the grammar."""
    sampler = llama_cpp.llama_sampler_init_grammar(None, text.encode(), b"root")
    if not sampler:
        return False
    llama_cpp.llama_sampler_free(sampler)
    return True


def we_accept(text: str) -> bool:
    try:
        gbnf_check.check(text)
    except GrammarError:
        return False
    return True


def refused(text: str, match: str) -> None:
    with pytest.raises(GrammarError, match=match):
        gbnf_check.check(text)


@pytest.mark.parametrize("depth", [20_000, 60_000])
def test_groups_nested_past_the_bound_are_refused_and_llama_cpp_no_longer_crashes(depth: int) -> None:
    text = "root ::= " + "(" * depth + '"a"' + ")" * depth
    refused(text, "nests more than the 200 groups")
    assert not llama_accepts(text)  # the patch's own bound (1000): a refusal, where it was a SIGSEGV


def test_nesting_at_the_bound_is_accepted_by_both() -> None:
    depth = gbnf_check.MAX_NESTING
    text = "root ::= " + "(" * depth + '"a"' + ")" * depth
    assert we_accept(text) and llama_accepts(text)


def test_a_repetition_whose_maximum_is_below_its_minimum_is_refused() -> None:
    # llama.cpp's loop of optional copies ran n - m times, wrapped around: until the memory ran out.
    refused('root ::= "a"{3,2}', "maximum below its minimum")
    assert not llama_accepts('root ::= "a"{3,2}')


def test_copies_past_the_element_bound_are_refused() -> None:
    literal = '"' + "a" * 5000 + '"'
    refused(f"root ::= {literal}{{2000}}", "more than 1048576 elements")


def test_rules_that_each_name_two_others_first_are_checked_in_linear_time() -> None:
    # llama.cpp's left-recursion walk revisited every path: 2^60 of them here (the patch skips rules done).
    lines = [f"r{n} ::= r{n + 1} | r{n + 2}" for n in range(60)] + ['r60 ::= "a"', 'r61 ::= "b"']
    text = "root ::= r0\n" + "\n".join(lines) + "\n"
    assert we_accept(text) and llama_accepts(text)


def test_a_chain_of_leftmost_references_past_the_bound_is_refused() -> None:
    chain = gbnf_check.MAX_RULE_CHAIN + 10
    text = "root ::= r0\n" + "".join(f"r{n} ::= r{n + 1}\n" for n in range(chain)) + f'r{chain} ::= "x"\n'
    refused(text, "chains more than 1000 rules")
    long_chain = "root ::= r0\n" + "".join(f"r{n} ::= r{n + 1}\n" for n in range(20_000)) + 'r20000 ::= "x"\n'
    assert not llama_accepts(long_chain)  # the patch: past 4096, refused rather than recursed


def test_left_recursion_through_rules_that_may_match_nothing_is_refused() -> None:
    # b matches nothing through a rule of its own, so llama.cpp's check (alternatives written empty)
    # misses it, and its stack advance pushed "x" for ever: now its expansion bound stops it too.
    text = 'root ::= b root "x" | "y"\nb ::= "a"*\n'
    refused(text, "through rules that may match nothing")
    assert not llama_accepts(text)


def test_recursion_that_repeats_the_same_stack_is_accepted_as_llama_cpp_accepts_it() -> None:
    # ("a"*)* (ggml-org/llama.cpp#18988): the stack comes back the same, which llama.cpp's advance sees.
    for text in ['root ::= ("a"*)*', 'root ::= ("a"? "b"?)* "c"', 'root ::= "z" | b root\nb ::= "a"*\n']:
        assert we_accept(text) and llama_accepts(text), text


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (" \n", "no rules"),
        ('a ::= "x"', "no 'root' rule"),
        ("root ::= missing", "never defines"),
        ('root ::= "a', "cannot be parsed"),
        ('root ::= "\\q"', "cannot be parsed"),
        ("root ::= <|im_end|>", "vocabulary"),
        ("root ::= <[4294967296]>", "too big"),
        ('root ::= "a"{2001}', "more than llama.cpp's 2000"),
        ('root ::= "a\0b"', "NUL"),
        ("root ::= x\nx ::= x", "left-recursive"),
    ],
)
def test_what_llama_cpp_refuses_is_refused_with_its_reason(text: str, match: str) -> None:
    refused(text, match)
    if "\0" not in text:
        assert not llama_accepts(text)


def test_a_grammar_longer_than_the_bound_is_refused_before_parsing() -> None:
    refused("root ::= " + '"a" ' * (gbnf_check.MAX_BYTES // 4), "longer than 1048576 bytes")


def test_token_pieces_are_checked_against_the_vocabulary() -> None:
    vocabulary = {"<|im_end|>": 2}
    gbnf_check.check("root ::= <|im_end|> !<|im_end|>", vocabulary.get)
    with pytest.raises(GrammarError, match="vocabulary"):
        gbnf_check.check("root ::= <|nope|>", vocabulary.get)


def test_the_servers_own_grammars_pass() -> None:
    own = [
        grammar.json_object_grammar(),
        grammar.schema_grammar(
            {
                "type": "object",
                "properties": {
                    "a": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,5}$"}}
                },
                "required": ["a"],
            }
        ),
        grammar.fenced_schema_grammar({"type": "object", "properties": {"n": {"type": "integer"}}}),
        text_grammars.regex_grammar(r"(ab|c[d-f]+)*\d{3}"),
        text_grammars.choice_grammar(["yes", "no", 'a "quoted" one']),
    ]
    for text in own:
        gbnf_check.check(text)
        assert llama_accepts(text)


# Fragments of GBNF, valid and not, that grammars are generated from: llama.cpp is the oracle.
_FRAGMENTS = [
    "root", "a", "b", "c-1", "root ::= ", "a ::= ", "b ::= ", "c-1 ::= ", " ::= ", "::=",
    '"x"', '"ab"', '""', '"\\n"', '"\\x41"', '"\\x4"', '"\\u00e9"', '"\\q"', '"é"', '"',
    "[a-z]", "[^a]", "[]", "[a-]", "[-a]", "[\\]]", "[a", "[\\x41-\\x5A]", "[a--]",
    "(", ")", "( ", " )", "|", " | ", "*", "+", "?", "{2}", "{1,3}", "{0,}", "{3,1}", "{0}", "{,2}", "{2,",
    ".", " ", "\t", "\n", "\r\n", "# note\n", "<[5]>", "!<[7]>", "<x>", "<[", "@", "::", "-",
]  # fmt: skip


# Mostly well-formed pieces, so that about half the rules generated from them are grammars.
_ATOMS = [
    '"x"', '"ab"', '""', '"\\n"', '"\\x41"', '"é"', "[a-z]", "[^a]", "[]", "[a-]", "[\\]]", ".", "<[5]>",
    "root", "a", "b", " ", " ", " | ", "(", ")", "()", "*", "+", "?", "{2}", "{1,3}", "{0,}", "{0}", "{3,1}",
]  # fmt: skip
# A grammar: rules of generated bodies (root and the rules it may name), or fragments with no shape.
_RULES = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.lists(st.sampled_from(_ATOMS), max_size=8)), max_size=3
).flatmap(
    lambda rules: st.lists(st.sampled_from(_ATOMS), max_size=10).map(
        lambda root: "\n".join(
            [
                f"root ::= {''.join(root)}",
                *(f"{name} ::= {''.join(body)}" for name, body in rules),
                'a ::= "a"',
                'b ::= "b"',
            ]
        )
    )
)
_GRAMMARS = st.one_of(_RULES, st.lists(st.sampled_from(_FRAGMENTS), max_size=24).map("".join))


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_GRAMMARS)
def test_acceptance_is_llama_cpps_on_generated_grammars(text: str) -> None:
    try:
        gbnf_check.check(text)
        ours = True
    except GrammarError as exc:
        if "may match nothing" in exc.message:
            return  # refused here on purpose, where llama.cpp might loop
        ours = False
    assert ours == llama_accepts(text), text
