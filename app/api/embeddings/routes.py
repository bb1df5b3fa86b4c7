"""`POST /v1/embeddings`: OpenAI's embeddings, from a model served with `embedding: true`."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from flask import Blueprint, Response, jsonify

from app.api.embeddings import openapi as doc
from app.api.embeddings.schemas import embedding_request_schema
from app.api.generation.embed import embedded
from app.api.http.body import parse_body, vector_engine
from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.api.http.openapi import documented
from app.api.routing.front import routed
from app.settings.current import current_config

bp = Blueprint("embeddings", __name__)


@bp.post("/v1/embeddings")
@documented(doc.EMBED)
@routed(use="embed")
def create_embeddings() -> Response:
    """One unit vector per input, several inputs per decode."""
    body = parse_body(embedding_request_schema, use="embed")
    engine = vector_engine()
    tokenizer, n_ctx = engine.tokenizer, engine.n_ctx
    inputs = []
    for index, item in enumerate(body["input"]):
        if isinstance(item, str):
            if not item:
                raise InvalidRequestError(f"input[{index}] is an empty string.", param="input")
            item = tokenizer.tokenize(item, add_special=True, parse_special=True)  # as llama-server does
        elif not tokenizer.in_vocabulary(item):
            raise InvalidRequestError(
                f"input[{index}]: every token id must be from 0 to {tokenizer.vocabulary_size - 1}.",
                param="input",
            )
        if len(item) > n_ctx:
            raise ContextLengthError(
                f"input[{index}] is {len(item)} tokens; this model's maximum context length is {n_ctx}.",
                param="input",
            )
        inputs.append(item)
    if body.get("dimensions") not in (None, engine.dimensions):
        raise InvalidRequestError(
            f"dimensions: this model makes {engine.dimensions}-dimensional embeddings and cannot "
            "shorten them.",
            param="dimensions",
        )
    vectors = embedded(engine, inputs)
    if isinstance(vectors, Response):  # another worker holding this model was idle: its answer
        return vectors
    as_base64 = body.get("encoding_format") == "base64"
    tokens = sum(len(item) for item in inputs)
    return jsonify(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "index": index, "embedding": _encoded(vector, as_base64)}
                for index, vector in enumerate(vectors)
            ],
            "model": current_config().model_id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def _encoded(vector: np.ndarray, as_base64: bool) -> Any:
    """The vector as JSON numbers, or as little-endian float32 bytes in base64 (how the openai SDK asks)."""
    if as_base64:
        return base64.b64encode(vector.astype("<f4").tobytes()).decode()
    return vector.tolist()
