"""A text prompt's tokens, as llama-server takes a prompt: text (filled in the middle, given a
suffix) or token ids (each checked against the vocabulary), for /v1/completions and /completion."""

from __future__ import annotations

from app.api.http.errors import InvalidRequestError
from app.engine.tokenizer import Tokenizer


def prompt_of(tokenizer: Tokenizer, item: str | list[int], suffix: str | None) -> tuple[list[int], str]:
    """A prompt's tokens and text: from text (filled in the middle, given a suffix) or from token ids."""
    if isinstance(item, str):
        return (tokenizer.infill(item, suffix) if suffix else tokenizer.text(item)), item
    if suffix:
        raise InvalidRequestError("suffix needs text prompts, not token ids.", param="suffix")
    if not tokenizer.in_vocabulary(item):
        raise InvalidRequestError(
            f"prompt: every token id must be from 0 to {tokenizer.vocabulary_size - 1}.", param="prompt"
        )
    return item, tokenizer.detokenize(item)
