"""A prompt's tokens within one of its beginnings, read off their pieces (a cache_control breakpoint's
count, pins.py): what tokenizing that beginning again gives, on the real tokenizers, where a block ends."""

from __future__ import annotations

import pytest

from app.api.prompting.prompt_places import first_past
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


@pytest.mark.parametrize(
    "path", [default_model_path(), str(real_models.gemma3_path())], ids=["smollm2", "gemma3"]
)
def test_a_tokens_place_in_the_text_falls_in_the_message_counting_tokens_finds(path: str) -> None:
    """Where a prompt left the cache (X-Cache-Miss): the message a token falls in, found from its
    place in the text (each rendering measured in bytes), is the one tokenizing each rendering finds."""
    model = LoadedModel(path, ContextShape(1, 512, 512, 512, 1))
    try:
        tokenizer = model.tokenizer
        text = tokenizer.render(MESSAGES, None, {}, True)
        tokens = tokenizer.chat_tokens(text)
        assert tokenizer.spelt_offset(text, tokens, len(tokens)) == len(tokenizer.chat_text(text).encode())

        def up_to(count: int) -> str:
            return tokenizer.render(MESSAGES[:count], None, {}, False)

        def in_bytes(count: int) -> int:
            return len(tokenizer.chat_text(up_to(count)).encode())

        def in_tokens(count: int) -> int:
            return len(tokenizer.chat_tokens(up_to(count)))

        places = []
        for at in range(len(tokens)):
            offset = tokenizer.spelt_offset(text, tokens, at)
            assert offset is not None
            place = first_past(MESSAGES, in_bytes, offset)
            assert place == first_past(MESSAGES, in_tokens, at), (
                at,
                tokenizer.detokenize(tokens[at : at + 1]),
            )
            places.append(place.message)
        assert places == sorted(places) and set(places) == {0, 1, 2, 3, 4}  # every message, in order
        assert tokenizer.spelt_offset(text, tokens[:3] + [-1] + tokens[4:], 5) is None  # an image's place
    finally:
        model.close()
