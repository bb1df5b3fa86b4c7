"""`POST /v1/rerank` (and llama-server's `/rerank`, `/reranking`, `/v1/reranking`): documents ranked.

Served by a reranking model (an LLM_MODELS entry with "embedding": true whose pooling is
rank, from the entry or the GGUF): each query-document pair is one input of the
embedding engine, and the classifier's score is the document's relevance.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.generation.embed import embedded
from app.api.http.body import embedding_engine, model_index, parse_json
from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.api.http.openapi import documented
from app.api.rerank import openapi as doc
from app.api.rerank.schemas import rerank_request_schema
from app.api.routing.front import routed
from app.engine.gguf import gguf_metadata
from app.settings.current import current_config

bp = Blueprint("rerank", __name__)
RANK_POOLING = 4  # llama.cpp's LLAMA_POOLING_TYPE_RANK, as a GGUF's pooling_type names it
NOT_A_RERANKER = (
    'The model \'{model}\' {does}; a reranker is served with "embedding": true and "pooling": "rank" '
    "(or a GGUF whose pooling type is rank) in LLM_MODELS."
)


@bp.post("/v1/rerank")
@bp.post("/rerank")
@bp.post("/v1/reranking")
@bp.post("/reranking")
@documented(doc.RERANK)
@routed(use="embed", pick=lambda name: _reranker(name))
def rerank() -> Response:
    """The documents, most relevant first (`top_n` of them), each with its index and score."""
    body = parse_json(rerank_request_schema)
    config = current_config()
    index = _reranker(body.get("model"))
    spec = config.models[index]
    if not spec.embedding:
        does = "generates text"
        raise InvalidRequestError(NOT_A_RERANKER.format(model=spec.id, does=does), param="model")
    engine = embedding_engine()
    if not engine.ranks:
        does = "computes embeddings, not relevance scores"
        raise InvalidRequestError(NOT_A_RERANKER.format(model=spec.id, does=does), param="model")
    pairs = [engine.tokenizer.rerank_pair(body["query"], document) for document in body["documents"]]
    for position, pair in enumerate(pairs):
        if len(pair) > engine.n_ctx:
            raise ContextLengthError(
                f"The query with documents[{position}] is {len(pair)} tokens; this model's maximum "
                f"context length is {engine.n_ctx}.",
                param="documents",
            )
    scores = embedded(engine, pairs)
    if isinstance(scores, Response):  # another worker holding this model was idle: its answer
        return scores
    tokens = sum(len(pair) for pair in pairs)
    ranked = sorted(range(len(pairs)), key=lambda i: -float(scores[i][0]))[: body.get("top_n") or len(pairs)]
    results = [
        {"index": i, "relevance_score": float(scores[i][0]),
         **({"document": {"text": body["documents"][i]}} if body.get("return_documents") else {})}
        for i in ranked
    ]  # fmt: skip
    return jsonify(
        {
            "model": spec.id,
            "object": "list",
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            "results": results,
        }
    )


def _reranker(name: str | None) -> int:
    """The entry a request names; without a name, the first reranking entry, else the first embedding one."""
    if name is not None:
        return model_index(name)
    served = current_config().models
    ranked = [i for i, spec in enumerate(served) if spec.embedding and _ranks(spec.pooling, spec.path)]
    return ranked[0] if ranked else model_index(None, "embed")


def _ranks(pooling: str | None, path: str) -> bool:
    """A reranking entry: its pooling `rank`, or none set and its GGUF's rank (as llama-server reads it)."""
    return pooling == "rank" or (pooling is None and gguf_metadata.pooling_type(path) == RANK_POOLING)
