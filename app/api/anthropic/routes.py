"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.anthropic import errors
from app.api.anthropic.presenter import MessagesPresenter
from app.api.anthropic.schemas import count_tokens_request_schema, messages_request_schema
from app.api.generation.loop import generate
from app.api.generation.planning import plan_chat_choice
from app.api.http.body import generating_engine, parse_request
from app.api.prompting import conversation, overflow
from app.api.requests.chat import ChatRequest
from app.api.routing.route import route_here_or_relay
from app.settings.current import current_config

bp = Blueprint("anthropic", __name__)
errors.init_blueprint(bp)


@bp.post("/v1/messages")
def create_message() -> Response:
    """Answer the conversation with a Message, or its event stream."""
    chat = parse_request(messages_request_schema, ChatRequest)
    if (relayed := route_here_or_relay(chat.model, streams=chat.stream)) is not None:
        return relayed
    engine = generating_engine()
    fitted = overflow.fitted_prompt(engine.tokenizer, chat)
    chat, prompt = fitted.chat, fitted.prompt
    budget = conversation.thinking_budget(engine.tokenizer, prompt, chat.reasoning_budget)
    requests = plan_chat_choice(
        chat,
        prompt.tokens,
        prompt.profile,
        engine.tokenizer,
        prompt_param="messages",
        thinking_budget=budget,
        media=prompt.media,
    )
    model = current_config().model_id
    presenter = MessagesPresenter(model, len(prompt.tokens), prompt.reader)
    return overflow.reported(generate(engine, chat.stream, requests, presenter, len(prompt.tokens)), fitted)


@bp.post("/v1/messages/count_tokens")
def count_tokens() -> Response:
    """How many tokens the conversation takes after the chat template, tools included."""
    chat = parse_request(count_tokens_request_schema, ChatRequest)
    if (relayed := route_here_or_relay(chat.model)) is not None:
        return relayed
    prompt = conversation.prompt(generating_engine().tokenizer, chat)
    return jsonify({"input_tokens": len(prompt.tokens)})
