"""The formats on the real llama.cpp: preserved control tokens written out; every grammar loads."""

from __future__ import annotations

import llama_cpp
from llama_cpp import _internals as internals

from app.api.prompting.call_grammars import calls_grammar
from app.chat_formats.base import Function
from app.chat_formats.detect import FORMATS
from app.engine.sampling.sampler import _grammar_sampler
from app.engine.tokenizer import Tokenizer
from app.settings.values import default_model_path


def test_a_preserved_control_token_is_written_out_and_plain_text_is_left_alone() -> None:
    model = internals.LlamaModel(
        path_model=default_model_path(), params=llama_cpp.llama_model_default_params(), verbose=False
    )
    tokenizer = Tokenizer(model)
    (start,) = tokenizer.tokenize("<|im_start|>", add_special=False, parse_special=True)
    assert tokenizer.piece(start) == b""  # a control token: llama.cpp writes nothing
    # SmolLM2's vocabulary holds <|im_start|> as a control token; <tool_call> is plain text.
    assert tokenizer.preserve(("<|im_start|>", "<tool_call>")) == ["<|im_start|>"]
    assert tokenizer.piece(start) == b"<|im_start|>"
    (letter,) = tokenizer.tokenize("a", add_special=False, parse_special=True)
    assert tokenizer.piece(letter) == b"a"


def test_every_format_names_the_markup_its_parser_needs() -> None:
    for fmt in FORMATS.values():
        assert set(fmt.triggers) <= set(fmt.markers), fmt.name
    assert "<|python_tag|>" in FORMATS["Llama 3.x"].markers
    assert {"<|channel|>", "<|message|>"} <= set(FORMATS["GPT-OSS"].markers)
    assert {"[TOOL_CALLS]", "[ARGS]"} <= set(FORMATS["Magistral"].markers)


def test_every_formats_grammar_and_its_lazy_triggers_load_in_llama_cpp() -> None:
    # llama.cpp builds trigger patterns with std::regex and does not catch its errors: a
    # pattern it cannot compile would end the worker, so each is loaded here for real.
    model = internals.LlamaModel(
        path_model=default_model_path(), params=llama_cpp.llama_model_default_params(), verbose=False
    )
    weather = Function("get_weather", {"type": "object", "properties": {"city": {"type": "string"}}})
    functions = [weather, Function("add-numbers_2", {"type": "object"})]  # every character a name may hold
    for fmt in FORMATS.values():
        for parallel in (True, False):
            for lazy in (True, False):
                grammar = calls_grammar(fmt, functions, parallel, lazy)
                assert bool(grammar.triggers) is lazy, fmt.name
                sampler = _grammar_sampler(model.vocab, grammar.gbnf, grammar.triggers)
                assert sampler, (fmt.name, parallel, lazy)
                llama_cpp.llama_sampler_free(sampler)
