"""A prompt's tokens within one of its beginnings, read off their pieces (a cache_control breakpoint's
count, pins.py): what tokenizing that beginning again gives, on the real tokenizers, where a block ends."""

from __future__ import annotations

import pytest

from app.engine.context import ContextShape
from app.engine.model import LoadedModel
from app.engine.scheduling import common_prefix
from app.settings.values import default_model_path
from harness import real_models

MESSAGES = [
    {"role": "system", "content": "You are a coder. Rules: keep it tidy.\nAlways test."},
    {"role": "user", "content": "Fix src/parse.py, please: it fails on ünïcode and 🙂.\nThanks!"},
    {"role": "assistant", "content": "Done: the parser reads UTF-8 now."},
    {"role": "user", "content": "Now run the tests."},
]


@pytest.mark.parametrize(
    "path", [default_model_path(), str(real_models.gemma3_path())], ids=["smollm2", "gemma3"]
)
def test_the_tokens_within_a_prompts_beginning_are_those_tokenizing_it_gives(path: str) -> None:
    model = LoadedModel(path, ContextShape(1, 512, 512, 512, 1))
    try:
        tokenizer = model.tokenizer
        text = tokenizer.render(MESSAGES, None, {}, True)
        tokens = tokenizer.chat_tokens(text)
        # Where a breakpoint's marker lands: after a block's text, before the template's next piece.
        ends = [text.index(m["content"]) + len(m["content"]) for m in MESSAGES]
        for end in [*ends, len(text)]:
            counted = tokenizer.spelt_within(text, tokens, text[:end])
            assert counted is not None and counted > 0
            assert counted == common_prefix(tokenizer.chat_tokens(text[:end]), tokens), text[:end][-20:]
        assert tokenizer.spelt_within(text, tokens, "not its beginning") is None
    finally:
        model.close()
