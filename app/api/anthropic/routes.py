"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.anthropic import errors, serving
from app.api.anthropic import openapi as doc
from app.api.anthropic.request import MessagesRequest
from app.api.anthropic.schemas import count_tokens_request_schema, messages_request_schema
from app.api.http.body import parse_request
from app.api.http.openapi import documented
from app.api.requests.chat import ChatRequest
from app.api.routing.front import routed

bp = Blueprint("anthropic", __name__)
errors.init_blueprint(bp)


@bp.post("/v1/messages")
@documented(doc.MESSAGES)
@routed(streams=True)
def create_message() -> Response:
    """Answer the conversation with a Message, or its event stream."""
    return serving.message(parse_request(messages_request_schema, MessagesRequest))


@bp.post("/v1/messages/count_tokens")
@documented(doc.COUNT_TOKENS)
@routed()
def count_tokens() -> Response:
    """How many tokens the conversation takes after the chat template, tools included."""
    chat = parse_request(count_tokens_request_schema, ChatRequest)
    return jsonify(serving.counted(chat))
