"""Tokens without generating: /tokenize, /detokenize, /tokenizer_info, and a chat request's prompt size.

The shapes are llama.cpp server's (`content`, `add_special`, `with_pieces`), and vLLM's
where lm-evaluation-harness uses them (`prompt`, `add_special_tokens`, /tokenizer_info).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from marshmallow import ValidationError, fields, validates_schema

from app.api import conversation
from app.api.errors import InvalidRequestError
from app.api.fields import StrictBoolean
from app.api.request_body import engine, model_index, parse_body, serve_here_or_relay
from app.api.schemas import BaseSchema, chat_completion_schema

bp = Blueprint("tokenize", __name__)


class TokenizeSchema(BaseSchema):
    model = fields.String(allow_none=True)
    content = fields.String()
    prompt = fields.String()  # vLLM's name for it
    add_special = StrictBoolean(allow_none=True)
    add_special_tokens = StrictBoolean(allow_none=True)  # vLLM's name for it
    parse_special = StrictBoolean(allow_none=True)
    with_pieces = StrictBoolean(allow_none=True)

    @validates_schema
    def text_given(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "content" not in data and "prompt" not in data:
            raise ValidationError("is required", "content")


class DetokenizeSchema(BaseSchema):
    model = fields.String(allow_none=True)
    tokens = fields.List(fields.Integer(strict=True), required=True)


tokenize_schema, detokenize_schema = TokenizeSchema(), DetokenizeSchema()


@bp.post("/tokenize")
def tokenize() -> Response:
    """Text to token ids (and their pieces, with `with_pieces`)."""
    body = parse_body(tokenize_schema, use=None)
    tokenizer = engine().tokenizer
    add_special = body.get("add_special", body.get("add_special_tokens")) or False
    parse_special = body.get("parse_special") is not False
    tokens = tokenizer.tokenize(body.get("content", body.get("prompt", "")), add_special, parse_special)
    if not body.get("with_pieces"):
        return jsonify({"tokens": tokens})
    return jsonify({"tokens": [{"id": token, "piece": _piece(tokenizer.piece(token))} for token in tokens]})


def _piece(raw: bytes) -> str | list[int]:
    """A piece as text, or as its bytes when it is part of a character (as llama.cpp's server shows it)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return list(raw)


@bp.post("/detokenize")
def detokenize() -> Response:
    """Token ids to text."""
    body = parse_body(detokenize_schema, use=None)
    tokenizer = engine().tokenizer
    if not tokenizer.in_vocabulary(body["tokens"]):
        raise InvalidRequestError(
            f"tokens: every id must be from 0 to {tokenizer.vocabulary_size - 1}.", param="tokens"
        )
    text = tokenizer.detokenize(body["tokens"])
    return jsonify({"content": text, "prompt": text})


@bp.get("/tokenizer_info")
def tokenizer_info() -> Response:
    """The special tokens and chat template (vLLM's endpoint, which lm-evaluation-harness reads)."""
    serve_here_or_relay(model_index(request.args.get("model")))
    tokenizer = engine().tokenizer
    return jsonify(
        {
            "model": current_app.config["LLM"].model_id,
            "bos_token": tokenizer.bos_text or None,
            "eos_token": tokenizer.eos_text,
            "pad_token": None,
            "chat_template": tokenizer.chat_template,
            "vocabulary_size": tokenizer.vocabulary_size,
        }
    )


@bp.post("/v1/chat/completions/input_tokens")
def chat_input_tokens() -> Response:
    """How many tokens a chat request's prompt takes after the chat template (tools included)."""
    body = parse_body(chat_completion_schema)
    tokens = conversation.prompt_tokens(engine().tokenizer, body["messages"], body)
    return jsonify({"object": "chat.completion.input_tokens", "input_tokens": len(tokens)})
