"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flask import Blueprint, Response, jsonify, request

from app.api.anthropic import cache_marks, errors, mcp_connector
from app.api.anthropic.presenter import MessagesPresenter
from app.api.anthropic.schemas import count_tokens_request_schema, messages_request_schema
from app.api.generation.loop import generate
from app.api.generation.planning import plan_chat_choice
from app.api.http.body import generating_engine, parse_request
from app.api.prompting import conversation, overflow
from app.api.requests.chat import ChatRequest
from app.api.routing.route import route_here_or_relay
from app.engine.tokenizer import Tokenizer
from app.engine.types import KeepPrefix
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
    body = request.get_json(force=True)  # as parsed for the view (cached)
    if body.get("mcp_servers"):  # the MCP connector: the server calls tools for the model
        return mcp_connector.respond(engine, chat, body, current_config().model_id)
    fitted = overflow.fitted_prompt(engine.tokenizer, chat)
    chat, prompt = fitted.chat, fitted.prompt
    budget = conversation.thinking_budget(engine.tokenizer, prompt, chat.reasoning_budget)
    marked = _covered(engine.tokenizer, fitted)
    requests = plan_chat_choice(
        chat,
        prompt.tokens,
        prompt.profile,
        engine.tokenizer,
        prompt_param="messages",
        thinking_budget=budget,
        media=prompt.media,
    )
    if marked:  # the prefix is asked to stay cached: the host cache keeps it over others a while
        keep = KeepPrefix(marked, cache_marks.kept_seconds(request.get_json(force=True)))
        requests = [replace(each, keep=keep) for each in requests]
    model = current_config().model_id
    presenter = MessagesPresenter(model, len(prompt.tokens), prompt.reader, marked)
    return overflow.reported(generate(engine, chat.stream, requests, presenter, len(prompt.tokens)), fitted)


def _covered(tokenizer: Tokenizer, fitted: overflow.Fitted) -> int:
    """The prompt tokens up to the request's last `cache_control` breakpoint (cache_marks.py); none
    counted for a prompt with media, or one whose oldest turns were dropped."""
    if fitted.prompt.media or fitted.dropped_messages:
        return 0
    body = request.get_json(force=True)  # as parsed for the view (cached)

    def render(marked: dict[str, Any]) -> str:
        return conversation.prompt(tokenizer, messages_request_schema.load(marked)).text

    return cache_marks.covered_tokens(body, fitted.prompt.tokens, render, tokenizer.chat_tokens)


@bp.post("/v1/messages/count_tokens")
def count_tokens() -> Response:
    """How many tokens the conversation takes after the chat template, tools included."""
    chat = parse_request(count_tokens_request_schema, ChatRequest)
    if (relayed := route_here_or_relay(chat.model)) is not None:
        return relayed
    prompt = conversation.prompt(generating_engine().tokenizer, chat)
    return jsonify({"input_tokens": len(prompt.tokens)})
