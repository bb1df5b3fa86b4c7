"""`POST /v1/embeddings`: OpenAI's embeddings, from a model served with `embedding: true`."""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.embeddings import openapi as doc
from app.api.embeddings import serving
from app.api.embeddings.request import EmbeddingRequest
from app.api.embeddings.schemas import embedding_request_schema
from app.api.http.body import parse_request
from app.api.http.openapi import documented
from app.api.routing.front import routed

bp = Blueprint("embeddings", __name__)


@bp.post("/v1/embeddings")
@documented(doc.EMBED)
@routed(use="embed")
def create_embeddings() -> Response:
    """One unit vector per input, several inputs per decode."""
    return serving.embeddings(parse_request(embedding_request_schema, EmbeddingRequest, use="embed"))
