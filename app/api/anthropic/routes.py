"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify

from app.api import conversation, structured_output, tools
from app.api.anthropic import conversion, errors
from app.api.anthropic.presenter import MessagesPresenter
from app.api.anthropic.schemas import count_tokens_request_schema, messages_request_schema
from app.api.engine_requests import plan_choices
from app.api.request_body import engine, parse_body
from app.api.respond import respond

bp = Blueprint("anthropic", __name__)
errors.init_blueprint(bp)


@bp.post("/v1/messages")
def create_message() -> Response:
    """Answer the conversation with a Message, or its event stream."""
    body = parse_body(messages_request_schema)
    the_engine = engine()
    chat = conversion.chat_body(body)
    prompt = conversation.prompt_tokens(the_engine.tokenizer, conversion.messages(body), chat)
    requests = plan_choices(
        chat,
        [prompt],
        prompt_param="messages",
        grammar=structured_output.checked(the_engine.tokenizer, conversion.grammar(chat), "tools"),
        vocabulary_size=the_engine.tokenizer.vocabulary_size,
    )
    call_tools = chat["tools"] if tools.active(chat) else None
    presenter = MessagesPresenter(
        current_app.config["LLM"].model_id, len(prompt), call_tools, tools.forced(chat)
    )
    return respond(the_engine, body, requests, presenter, len(prompt))


@bp.post("/v1/messages/count_tokens")
def count_tokens() -> Response:
    """How many tokens the conversation takes after the chat template, tools included."""
    body = parse_body(count_tokens_request_schema)
    chat = conversion.chat_body(body)
    tokens = conversation.prompt_tokens(engine().tokenizer, conversion.messages(body), chat)
    return jsonify({"input_tokens": len(tokens)})
