"""`POST /v1/chat/completions`."""

from __future__ import annotations

from flask import Blueprint, Response

from app.generate import engine, parse_body, plan, respond
from app.schemas import chat_completion_schema

bp = Blueprint("chat", __name__)


@bp.post("/v1/chat/completions")
def create_chat_completion() -> Response:
    """Answer a conversation, formatted by the model's own chat template."""
    body = parse_body(chat_completion_schema)
    prompt_tokens = engine().tokenizer.chat(body["messages"])
    gen_request = plan(body, prompt_tokens, prompt_param="messages", max_param="max_completion_tokens")
    return respond(body, gen_request, chat=True)
