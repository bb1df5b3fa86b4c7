"""Tokens without generating: /tokenize, /detokenize and /tokenizer_info.

The shapes are llama.cpp server's (`content`, `add_special`, `with_pieces`), and vLLM's
where lm-evaluation-harness uses them (`prompt`, `add_special_tokens`, /tokenizer_info).
"""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.http.body import parse_request
from app.api.http.openapi import documented
from app.api.routing.front import routed
from app.api.tokens import openapi as doc
from app.api.tokens import serving
from app.api.tokens.request import DetokenizeRequest, TokenizeRequest
from app.api.tokens.schemas import detokenize_schema, tokenize_schema

bp = Blueprint("tokens", __name__)


@bp.post("/tokenize")
@documented(doc.TOKENIZE)
@routed(use=None)
def tokenize() -> Response:
    """Text to token ids (and their pieces, with `with_pieces`)."""
    return serving.tokenized(parse_request(tokenize_schema, TokenizeRequest, use=None))


@bp.post("/detokenize")
@documented(doc.DETOKENIZE)
@routed(use=None)
def detokenize() -> Response:
    """Token ids to text."""
    return serving.detokenized(parse_request(detokenize_schema, DetokenizeRequest, use=None))


@bp.get("/tokenizer_info")
@documented(doc.TOKENIZER_INFO)
@routed(use=None, source="query", wakes=False, loads=False)
def tokenizer_info() -> Response:
    """The special tokens and chat template (vLLM's endpoint, which lm-evaluation-harness reads)."""
    return serving.tokenizer_info()
