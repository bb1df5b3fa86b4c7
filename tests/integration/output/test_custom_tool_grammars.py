"""A custom tool's grammar holds the model's input: every input the Lark grammar accepts, llama.cpp's own
grammar sampler lets the model write (inside the call's JSON arguments) and end; others it stops. Checked
on the default model's vocabulary, then on the model itself through the openai SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest
from lark import Lark

from app.api.prompting.call_grammars import calls_grammar
from app.chat_formats.base import Function
from app.chat_formats.detect import by_name
from app.engine.errors import GrammarError
from harness.vocabulary import Vocabulary, default_vocabulary

PATCH_GRAMMAR = (Path(__file__).parents[2] / "data" / "grammars" / "apply_patch.lark").read_text()
INPUT = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
VALID = [
    '*** Begin Patch\n*** Add File: hello.txt\n+Hello, "world"!\n+\ttabbed \\ back\n*** End Patch\n',
    "*** Begin Patch\n*** Update File: src/app.py\n@@ def main():\n-    pass\n+    run()\n*** End Patch",
    "*** Begin Patch\n*** Delete File: old.txt\n*** Add File: new.txt\n+x\n*** End Patch\n",
]
INVALID = [
    "*** Begin Patch\n*** Add File: hello.txt\nHello\n*** End Patch\n",  # a line without its +
    "*** Begin Patch\n*** End Patch\n",  # no hunk
    "Begin Patch\n*** Add File: a\n+a\n*** End Patch\n",
]


@pytest.fixture(scope="module")
def vocabulary() -> Iterator[Vocabulary]:
    with default_vocabulary() as loaded:
        yield loaded


def _call(text: str) -> str:
    return json.dumps({"name": "apply_patch", "arguments": {"input": text}}, ensure_ascii=False)


# The same language with llguidance-style terminals that may match nothing (as OpenAI's grammars have).
ZERO_WIDTH = PATCH_GRAMMAR.replace("TEXT?", "/(.*)/")


@pytest.mark.parametrize("definition", [PATCH_GRAMMAR, ZERO_WIDTH], ids=["lark", "zero-width"])
def test_the_grammar_allows_exactly_the_patches_lark_accepts(vocabulary: Vocabulary, definition: str) -> None:
    lark = Lark(PATCH_GRAMMAR)
    tool = Function("apply_patch", INPUT, ("lark", definition))
    gbnf = calls_grammar(by_name("Generic"), [tool], False, lazy=False).gbnf
    for text in VALID:
        lark.parse(text)  # the test's own inputs are patches
        assert vocabulary.accepts(gbnf, _call(text)), text
    for text in INVALID:
        assert not vocabulary.accepts(gbnf, _call(text)), text
    raw_newline = _call("*** Begin Patch\n*** Delete File: a\n*** End Patch").replace("\\n", "\n")
    assert not vocabulary.accepts(gbnf, raw_newline)  # inside JSON, a newline is written \n


def test_a_regex_format_and_a_grammar_llama_cpp_cannot_take(vocabulary: Vocabulary) -> None:
    digits = Function("pin", INPUT, ("regex", r"\d{4}-[A-Z]{2}"))
    gbnf = calls_grammar(by_name("Generic"), [digits], False, lazy=False).gbnf
    assert vocabulary.accepts(gbnf, '{"name": "pin", "arguments": {"input": "1234-AB"}}')
    assert not vocabulary.accepts(gbnf, '{"name": "pin", "arguments": {"input": "1234-ab"}}')
    with pytest.raises(GrammarError, match="Lark grammar cannot be read"):
        calls_grammar(
            by_name("Generic"), [Function("bad", INPUT, ("lark", "start: undefined_rule"))], False, False
        )


def test_the_model_writes_a_patch_the_grammar_accepts(client: openai.OpenAI) -> None:
    # One file of a line or two, lines of at most 30 characters: a small model's patch ends.
    short = PATCH_GRAMMAR.replace("add_line+", "add_line ~ 1..2").replace("hunk+", "hunk")
    short = short.replace("TEXT: /[^\\n]+/", "TEXT: /[^\\n]{1,30}/")
    tool = {"type": "custom", "name": "apply_patch", "description": "Create or edit files with a patch",
            "format": {"type": "grammar", "syntax": "lark", "definition": short}}  # fmt: skip
    response = client.responses.create(
        model="SmolLM2-135M-Instruct.Q4_1",
        input="Create the file greeting.txt holding the word hello.",
        tools=[tool],
        tool_choice={"type": "custom", "name": "apply_patch"},
        temperature=0,
        max_output_tokens=300,
    )
    (call,) = response.output
    assert call.type == "custom_tool_call" and call.name == "apply_patch"
    assert response.status == "completed", call.input
    Lark(short).parse(call.input)  # raises if the model's input is not a patch
