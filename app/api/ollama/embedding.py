"""Ollama's embeddings served: `/api/embed` (unit vectors of one or more inputs, cut at the context
unless `truncate` is false) and the older `/api/embeddings` (one prompt's vector)."""

from __future__ import annotations

import time

import numpy as np
from flask import Response, g, jsonify

from app.api.generation.embed import embedded
from app.api.http.body import vector_engine
from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.api.ollama.presenter import NS
from app.api.ollama.request import OllamaEmbedRequest


def embed(asked: OllamaEmbedRequest) -> Response:
    """`/api/embed`'s answer: the vectors, the name as written, the durations and the tokens read."""
    started = time.monotonic()
    vectors = _vectors(asked)
    if isinstance(vectors, Response):
        return vectors
    if asked.dimensions not in (None, vectors.shape[1]):
        raise InvalidRequestError(f"dimensions: this model makes {vectors.shape[1]}-dimensional embeddings.")
    loading = g.get("load_seconds", 0.0)  # an on-demand model loaded for this request
    return jsonify(
        {
            "model": asked.named,
            "embeddings": vectors.tolist(),
            "total_duration": int((time.monotonic() - started + loading) * NS),
            "load_duration": int(loading * NS),
            "prompt_eval_count": g.stats.prompt_tokens,
        }
    )


def embedding(asked: OllamaEmbedRequest) -> Response:
    """`/api/embeddings`' answer: `{"embedding": [...]}`."""
    vectors = _vectors(asked)
    if isinstance(vectors, Response):
        return vectors
    return jsonify({"embedding": vectors[0].tolist()})


def _vectors(asked: OllamaEmbedRequest) -> np.ndarray | Response:
    engine = vector_engine()
    tokenizer, n_ctx = engine.tokenizer, engine.n_ctx
    inputs = []
    for index, text in enumerate(asked.texts):
        tokens = tokenizer.tokenize(text, add_special=True, parse_special=True) or [0]
        if len(tokens) > n_ctx:
            if not asked.truncate:
                raise ContextLengthError(
                    f"input[{index}] is {len(tokens)} tokens, past this model's context of {n_ctx} "
                    "(truncate: false)."
                )
            tokens = tokens[:n_ctx]
        inputs.append(tokens)
    return embedded(engine, inputs)
