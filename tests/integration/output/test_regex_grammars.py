"""A regular expression made a grammar means what the expression means: every text Python's `re`
matches whole, llama.cpp's own grammar sampler lets the model write and end, and texts it does not
match it stops (\\d, \\w and \\s as ASCII classes, as in vLLM's backends). Checked on the default
model's vocabulary, with texts generated from each pattern by hypothesis."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.engine.sampling.text_grammars import choice_grammar, regex_grammar
from harness.vocabulary import Vocabulary, default_vocabulary

PATTERNS = [
    r"\(\d{3}\) \d{3}-\d{4}",
    r"[A-Z][a-z]{2,9} (is|was) [0-9]{1,3}( years old)?\.",
    r"^(yes|no|maybe)$",
    r"[^aeiou\n]{1,6}",
    r"\w+@\w+\.(com|org)",
    r"-?\d+(\.\d{1,2})?",
    r"(?s)<.{0,4}>",
    r"[\D]{2}x\S?",
    r"a*?b+c??[\s]",
    r"café [^^\]]\"\\",
    r"(ab|c){2,3}(?:d|)",
]
# Assigned characters but NUL (which a C string cannot carry to the tokenizer); texts the
# vocabulary cannot write (a character it lacks) are left out by `assume`.
TEXT = st.characters(codec="utf-8", min_codepoint=1, exclude_categories=("Cn", "Co"))


@pytest.fixture(scope="module")
def vocabulary() -> Iterator[Vocabulary]:
    with default_vocabulary() as loaded:
        yield loaded


def matches(pattern: str, text: str) -> bool:
    return re.fullmatch(pattern, text, re.ASCII) is not None


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_text_the_expression_matches_is_allowed(vocabulary: Vocabulary, data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS))
    text = data.draw(st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True, alphabet=TEXT))
    assume(vocabulary.writes(text))
    assert vocabulary.accepts(regex_grammar(pattern), text), (pattern, text)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_text_the_expression_does_not_match_is_refused(vocabulary: Vocabulary, data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS))
    text = data.draw(st.from_regex(re.compile(pattern, re.ASCII), fullmatch=True, alphabet=TEXT))
    # One edit away from a match: a character dropped, added or changed.
    at = data.draw(st.integers(0, len(text)))
    edit = data.draw(st.sampled_from(["drop", "add", "change"]) if text else st.just("add"))
    char = data.draw(TEXT)
    if edit == "drop":
        text = text[: max(at - 1, 0)] + text[at:]
    else:
        text = text[:at] + char + text[at + (edit == "change") :]
    assume(vocabulary.writes(text))
    assert vocabulary.accepts(regex_grammar(pattern), text) == matches(pattern, text), (pattern, text)


def test_a_choice_allows_each_string_whole_and_nothing_else(vocabulary: Vocabulary) -> None:
    choices = ["positive", "negative", 'say "hi" \\ now', "naïve"]
    gbnf = choice_grammar(choices)
    assert all(vocabulary.accepts(gbnf, choice) for choice in choices)
    for other in ["posit", "positive!", "Positive", "", "negativepositive", "naive"]:
        assert not vocabulary.accepts(gbnf, other), other
