"""Tokens without generating: /tokenize, /detokenize and /tokenizer_info.

The shapes are llama.cpp server's (`content`, `add_special`, `with_pieces`), and vLLM's
where lm-evaluation-harness uses them (`prompt`, `add_special_tokens`, /tokenizer_info).
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.http.body import loaded_engine, parse_body
from app.api.http.errors import InvalidRequestError
from app.api.http.openapi import documented
from app.api.routing.front import routed
from app.api.tokens import openapi as doc
from app.api.tokens.schemas import detokenize_schema, tokenize_schema
from app.settings.current import current_config

bp = Blueprint("tokens", __name__)


@bp.post("/tokenize")
@documented(doc.TOKENIZE)
@routed(use=None)
def tokenize() -> Response:
    """Text to token ids (and their pieces, with `with_pieces`)."""
    body = parse_body(tokenize_schema, use=None)
    tokenizer = loaded_engine().tokenizer
    add_special = body.get("add_special", body.get("add_special_tokens")) or False
    parse_special = body.get("parse_special") is not False
    tokens = tokenizer.tokenize(body.get("content", body.get("prompt", "")), add_special, parse_special)
    # llama-server's `tokens`, with vLLM's `count` and `max_model_len` beside them.
    sizes: dict[str, object] = {"count": len(tokens), "max_model_len": current_config().n_ctx}
    if body.get("return_token_strs"):  # vLLM's: the strings of the vocabulary (Ġ for a space in BPE)
        sizes["token_strs"] = tokenizer.vocabulary_strings(tokens)
    if not body.get("with_pieces"):
        return jsonify({"tokens": tokens, **sizes})
    pieces = [{"id": token, "piece": _piece(tokenizer.piece(token))} for token in tokens]
    return jsonify({"tokens": pieces, **sizes})


def _piece(raw: bytes) -> str | list[int]:
    """A piece as text, or as its bytes when it is part of a character (as llama.cpp's server shows it)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


@bp.post("/detokenize")
@documented(doc.DETOKENIZE)
@routed(use=None)
def detokenize() -> Response:
    """Token ids to text."""
    body = parse_body(detokenize_schema, use=None)
    tokenizer = loaded_engine().tokenizer
    if not tokenizer.in_vocabulary(body["tokens"]):
        raise InvalidRequestError(
            f"tokens: every id must be from 0 to {tokenizer.vocabulary_size - 1}.", param="tokens"
        )
    text = tokenizer.detokenize(body["tokens"])
    return jsonify({"content": text, "prompt": text})


@bp.get("/tokenizer_info")
@documented(doc.TOKENIZER_INFO)
@routed(use=None, source="query")
def tokenizer_info() -> Response:
    """The special tokens and chat template (vLLM's endpoint, which lm-evaluation-harness reads)."""
    tokenizer = loaded_engine().tokenizer
    return jsonify(
        {
            "model": current_config().model_id,
            "bos_token": tokenizer.bos_text or None,
            "eos_token": tokenizer.eos_text,
            "pad_token": None,
            "chat_template": tokenizer.chat_template,
            "vocabulary_size": tokenizer.vocabulary_size,
        }
    )
