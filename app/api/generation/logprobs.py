"""OpenAI's two logprobs shapes: chat's `content` list, and completions' parallel lists."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.engine.types import TokenLogprob


def _text(piece: bytes) -> str:
    return piece.decode("utf-8", errors="replace")


def chat(entries: Iterable[TokenLogprob]) -> dict[str, Any]:
    """`choices[].logprobs` of a chat completion or chunk."""
    return {
        "content": [
            {
                "token": _text(entry.piece),
                "logprob": entry.logprob,
                "bytes": list(entry.piece),
                "top_logprobs": [
                    {"token": _text(piece), "logprob": logprob, "bytes": list(piece)}
                    for _, piece, logprob in entry.top
                ],
            }
            for entry in entries
        ],
        "refusal": None,
    }


class TextLogprobs:
    """`choices[].logprobs` of text completions, whose `text_offset` runs across chunks."""

    def __init__(self, offset: int) -> None:
        self.offset = offset  # where the generated text starts (after an echoed prompt)

    def format(self, entries: Iterable[TokenLogprob]) -> dict[str, Any]:
        """The lists for `entries`, advancing the running text offset."""
        shape: dict[str, list[Any]] = {
            "tokens": [],
            "token_logprobs": [],
            "top_logprobs": [],
            "text_offset": [],
        }
        for entry in entries:
            token = _text(entry.piece)
            shape["tokens"].append(token)
            shape["token_logprobs"].append(entry.logprob)
            # A prompt's first token was predicted by nothing: null, as OpenAI's legacy echo has it.
            # The chosen token is always there, as OpenAI has it: up to `logprobs` + 1 entries.
            alternatives = {_text(piece): logprob for _, piece, logprob in entry.top}
            if entry.logprob is not None:
                alternatives.setdefault(token, entry.logprob)
            shape["top_logprobs"].append(None if entry.logprob is None else alternatives)
            shape["text_offset"].append(self.offset)
            self.offset += len(token)
        return shape
