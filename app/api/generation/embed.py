"""Inputs through this worker's embedding engine, or the whole request handed to an idle peer holding it."""

from __future__ import annotations

import numpy as np
from flask import Response, g, request

from app import workers
from app.engine.embedding_engine import EmbeddingEngine
from app.engine.errors import QueueFullError
from app.serving import relay


def embedded(engine: EmbeddingEngine, inputs: list[list[int]]) -> np.ndarray | Response:
    """One row per input (vectors, or a reranker's scores); or the answer of an idle peer holding
    the same model, which the view returns as it is."""
    relayed = relay.to_idle_peer(request, engine, workers.this_worker())
    if relayed is not None:
        g.stats.relayed = True
        return relayed
    try:
        rows = engine.embed(inputs)
    except QueueFullError:
        g.stats.rejected = True
        raise
    g.stats.prompt_tokens = sum(len(item) for item in inputs)
    return rows
