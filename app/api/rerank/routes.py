"""`POST /v1/rerank` (and llama-server's `/rerank`, `/reranking`, `/v1/reranking`): documents ranked,
by a reranking model (an LLM_MODELS entry with "embedding": true whose pooling is rank, from the
entry or the GGUF)."""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.http.body import load_request
from app.api.http.openapi import documented
from app.api.rerank import openapi as doc
from app.api.rerank import serving
from app.api.rerank.request import RerankRequest
from app.api.rerank.schemas import rerank_request_schema
from app.api.routing.front import routed

bp = Blueprint("rerank", __name__)


@bp.post("/v1/rerank")
@bp.post("/rerank")
@bp.post("/v1/reranking")
@bp.post("/reranking")
@documented(doc.RERANK)
@routed(use="embed", pick=lambda name: serving.reranker(name))
def rerank() -> Response:
    """The documents, most relevant first (`top_n` of them), each with its index and score."""
    return serving.rerank(load_request(rerank_request_schema, RerankRequest))
