"""The token routes' requests as their serving needs them: llama-server's and vLLM's names for the
same field read once, here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TokenizeRequest:
    """`POST /tokenize`, validated: `content` or vLLM's `prompt`, `add_special` or `add_special_tokens`."""

    text: str
    model: str | None = None
    add_special: bool = False  # the model's BOS (and what its tokenizer adds)
    parse_special: bool = True  # special tokens written in the text are tokens, not text
    with_pieces: bool = False  # each id with its piece (llama-server's)
    token_strs: bool = False  # vLLM's return_token_strs: the vocabulary's own strings


@dataclass(frozen=True)
class DetokenizeRequest:
    """`POST /detokenize`, validated."""

    tokens: tuple[int, ...]
    model: str | None = None
