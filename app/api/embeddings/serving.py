"""OpenAI's embeddings served: each input tokenized as llama-server does and checked against the
context, all of them through one decode, and the vectors as numbers or base64."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from flask import Response, jsonify

from app.api.embeddings.request import EmbeddingRequest
from app.api.generation.embed import embedded
from app.api.http.body import vector_engine
from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.engine.tokenizer import Tokenizer
from app.settings.current import current_config


def embeddings(asked: EmbeddingRequest) -> Response:
    """One unit vector per input, several inputs per decode."""
    engine = vector_engine()
    inputs = [_tokens(engine.tokenizer, item, index, engine.n_ctx) for index, item in enumerate(asked.inputs)]
    if asked.dimensions not in (None, engine.dimensions):
        raise InvalidRequestError(
            f"dimensions: this model makes {engine.dimensions}-dimensional embeddings and cannot "
            "shorten them.",
            param="dimensions",
        )
    vectors = embedded(engine, inputs)
    if isinstance(vectors, Response):  # another worker holding this model was idle: its answer
        return vectors
    tokens = sum(len(item) for item in inputs)
    return jsonify(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": index, "embedding": _encoded(vector, asked.base64)}
                for index, vector in enumerate(vectors)
            ],
            "model": current_config().model_id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def _tokens(tokenizer: Tokenizer, item: str | tuple[int, ...], index: int, n_ctx: int) -> list[int]:
    """One input's tokens (a text's with the model's BOS and special tokens, as llama-server's), or a
    400 naming it: empty, a token id past the vocabulary, or longer than the context."""
    if isinstance(item, str):
        if not item:
            raise InvalidRequestError(f"input[{index}] is an empty string.", param="input")
        tokens = tokenizer.tokenize(item, add_special=True, parse_special=True)
    elif tokenizer.in_vocabulary(list(item)):
        tokens = list(item)
    else:
        raise InvalidRequestError(
            f"input[{index}]: every token id must be from 0 to {tokenizer.vocabulary_size - 1}.",
            param="input",
        )
    if len(tokens) > n_ctx:
        raise ContextLengthError(
            f"input[{index}] is {len(tokens)} tokens; this model's maximum context length is {n_ctx}.",
            param="input",
        )
    return tokens


def _encoded(vector: np.ndarray, as_base64: bool) -> Any:
    """The vector as JSON numbers, or as little-endian float32 bytes in base64 (how the openai SDK asks)."""
    if as_base64:
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return vector.tolist()
