"""An embeddings request as its serving needs it: the inputs (texts or token ids) and the answer's form."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EmbeddingRequest:
    """`POST /v1/embeddings`, validated: nothing of the body is read again."""

    inputs: tuple[str | tuple[int, ...], ...]  # each a text, or the token ids of one
    model: str | None = None
    base64: bool = False  # encoding_format "base64": little-endian float32 bytes, as the openai SDK asks
    dimensions: int | None = None  # the size the client expects (this server cannot shorten a vector)
