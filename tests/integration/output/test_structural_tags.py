"""vLLM's structural tags as GBNF, checked by llama.cpp's own grammar sampler on the default vocabulary.

Free text is allowed wherever it holds no trigger; each trigger must open a whole structure
(its begin, JSON following its schema, its end), after which free text goes on. Texts are
drawn by hypothesis: free text (triggers scrubbed out) with structures spliced in must be
allowed; the same text with a trigger left dangling, or a structure's JSON broken, refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.engine.errors import GrammarError
from app.engine.sampling.tag_grammars import TaggedStructure, structural_tag_grammar
from harness.vocabulary import Vocabulary, default_vocabulary

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
STRUCTURES = [
    TaggedStructure("<function=weather>", WEATHER, "</function>"),
    TaggedStructure("<function=time>", {"type": "object"}, "</function>"),
    TaggedStructure("<<sum>>", {"type": "integer"}, ""),
]
TRIGGERS = ["<function=", "<<"]
GRAMMAR = structural_tag_grammar(STRUCTURES, TRIGGERS)
FREE = st.text(st.characters(codec="ascii", min_codepoint=32, max_codepoint=126), max_size=30)
TAGGED = st.sampled_from(
    ['<function=weather>{"city": "Paris"}</function>', "<function=time>{}</function>", "<<sum>>42"]
)


@pytest.fixture(scope="module")
def vocabulary() -> Iterator[Vocabulary]:
    with default_vocabulary() as loaded:
        yield loaded


def scrubbed(text: str) -> str:
    """`text` with no trigger in it (and none made where it meets what comes next: no trailing '<')."""
    while any(trigger in text for trigger in TRIGGERS):
        for trigger in TRIGGERS:
            text = text.replace(trigger, "")
    return text.rstrip("<")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.tuples(FREE, TAGGED), max_size=3), tail=FREE)
def test_free_text_with_whole_structures_is_allowed(vocabulary: Vocabulary, parts: list, tail: str) -> None:
    text = "".join(scrubbed(free) + tagged for free, tagged in parts) + scrubbed(tail)
    assume(vocabulary.writes(text))
    assert vocabulary.accepts(GRAMMAR, text), text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(head=FREE, tail=FREE, broken=st.sampled_from(["dangling", "bad json", "unknown"]))
def test_a_trigger_that_opens_no_whole_structure_is_refused(
    vocabulary: Vocabulary, head: str, tail: str, broken: str
) -> None:
    middle = {
        "dangling": "<function=",  # the trigger, then free text
        "bad json": '<function=weather>{"city": 3}</function>',
        "unknown": "<function=other>{}</function>",
    }[broken]
    text = scrubbed(head) + middle + scrubbed(tail)
    assume(vocabulary.writes(text))
    assert not vocabulary.accepts(GRAMMAR, text), text


def test_the_grammar_follows_the_triggers_overlaps(vocabulary: Vocabulary) -> None:
    # "<<" inside "<function=" prefixes and the other way round: the automaton's fail links.
    assert vocabulary.accepts(GRAMMAR, "a <function <<sum>>7 b")
    assert vocabulary.accepts(GRAMMAR, "<function<function=time>{}</function>")
    assert not vocabulary.accepts(GRAMMAR, "<<function=time>{}</function>")  # "<<" opens first
    assert vocabulary.accepts(GRAMMAR, "")


def test_a_structure_no_trigger_opens_or_an_empty_trigger_is_refused() -> None:
    with pytest.raises(GrammarError, match="starts with none of the triggers"):
        structural_tag_grammar([TaggedStructure("[call]", WEATHER, "")], ["<function="])
    with pytest.raises(GrammarError, match="non-empty"):
        structural_tag_grammar(STRUCTURES, [""])
    assert json.loads('{"city": "x"}')  # (the schemas' JSON is llama.cpp's converter's, as everywhere)
