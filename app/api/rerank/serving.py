"""Documents ranked by a reranking model: each query-document pair is one input of the embedding
engine, and the classifier's score is the document's relevance."""

from __future__ import annotations

from flask import Response, jsonify

from app.api.generation.embed import embedded
from app.api.http.body import embedding_engine, model_index
from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.api.rerank.request import RerankRequest
from app.engine.gguf import gguf_metadata
from app.settings.current import current_config

RANK_POOLING = 4  # llama.cpp's LLAMA_POOLING_TYPE_RANK, as a GGUF's pooling_type names it
NOT_A_RERANKER = (
    'The model \'{model}\' {does}; a reranker is served with "embedding": true and "pooling": "rank" '
    "(or a GGUF whose pooling type is rank) in LLM_MODELS."
)


def rerank(asked: RerankRequest) -> Response:
    """The documents, most relevant first (`top_n` of them), each with its index and score."""
    spec = current_config().models[reranker(asked.model)]
    if not spec.embedding:
        raise InvalidRequestError(NOT_A_RERANKER.format(model=spec.id, does="generates text"), param="model")
    engine = embedding_engine()
    if not engine.ranks:
        does = "computes embeddings, not relevance scores"
        raise InvalidRequestError(NOT_A_RERANKER.format(model=spec.id, does=does), param="model")
    pairs = [engine.tokenizer.rerank_pair(asked.query, document) for document in asked.documents]
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
    ranked = sorted(range(len(pairs)), key=lambda i: -float(scores[i][0]))[: asked.top_n or len(pairs)]
    results = [
        {"index": i, "relevance_score": float(scores[i][0]),
         **({"document": {"text": asked.documents[i]}} if asked.return_documents else {})}
        for i in ranked
    ]  # fmt: skip
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return jsonify({"model": spec.id, "object": "list", "usage": usage, "results": results})


def reranker(name: str | None) -> int:
    """The entry a request names; without a name, the first reranking entry, else the first embedding one."""
    if name is not None:
        return model_index(name)
    served = current_config().models
    ranked = [i for i, spec in enumerate(served) if spec.embedding and _ranks(spec.pooling, spec.path)]
    return ranked[0] if ranked else model_index(None, "embed")


def _ranks(pooling: str | None, path: str) -> bool:
    """A reranking entry: its pooling `rank`, or none set and its GGUF's rank (as llama-server reads it)."""
    return pooling == "rank" or (pooling is None and gguf_metadata.pooling_type(path) == RANK_POOLING)
