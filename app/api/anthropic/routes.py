"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.anthropic import conversion, errors
from app.api.anthropic.presenter import MessagesPresenter
from app.api.anthropic.schemas import count_tokens_request_schema, messages_request_schema
from app.api.generation.loop import generate
from app.api.generation.planning import plan_chat_choice
from app.api.http.body import generating_engine, parse_body
from app.api.prompting import conversation
from app.api.routing.route import route_here_or_relay
from app.settings.current import current_config

bp = Blueprint("anthropic", __name__)
errors.init_blueprint(bp)


@bp.post("/v1/messages")
def create_message() -> Response:
    """Answer the conversation with a Message, or its event stream."""
    body = parse_body(messages_request_schema)
    if (relayed := route_here_or_relay(body.get("model"), streams=body.get("stream"))) is not None:
        return relayed
    engine = generating_engine()
    chat = conversion.as_chat(body)
    prompt = conversation.prompt(engine.tokenizer, chat)
    budget = conversation.thinking_budget(engine.tokenizer, prompt, chat.reasoning_budget)
    requests = plan_chat_choice(
        chat, prompt.tokens, prompt.profile, engine.tokenizer, prompt_param="messages", thinking_budget=budget
    )
    model = current_config().model_id
    presenter = MessagesPresenter(model, len(prompt.tokens), prompt.reader)
    return generate(engine, chat.stream, requests, presenter, len(prompt.tokens))


@bp.post("/v1/messages/count_tokens")
def count_tokens() -> Response:
    """How many tokens the conversation takes after the chat template, tools included."""
    body = parse_body(count_tokens_request_schema)
    if (relayed := route_here_or_relay(body.get("model"), streams=body.get("stream"))) is not None:
        return relayed
    prompt = conversation.prompt(generating_engine().tokenizer, conversion.as_chat(body))
    return jsonify({"input_tokens": len(prompt.tokens)})
