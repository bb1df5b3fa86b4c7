"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from flask import Blueprint, Response, jsonify

from app.api.anthropic import errors, mcp_connector, pins, window
from app.api.anthropic import openapi as doc
from app.api.anthropic.presenter import MessagesPresenter, Shape
from app.api.anthropic.request import MessagesRequest
from app.api.anthropic.schemas import count_tokens_request_schema, messages_request_schema
from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import generate
from app.api.generation.served import plan_inputs
from app.api.http import sealing, skipped_tools
from app.api.http.body import generating_engine, parse_request
from app.api.http.openapi import documented
from app.api.prompting import context_edits, conversation, overflow, prompt_places
from app.api.requests.chat import ChatRequest
from app.api.routing.front import routed
from app.engine.tokenizer import Tokenizer
from app.engine.types import PinnedPrefix
from app.settings.config import Config
from app.settings.current import current_config

bp = Blueprint("anthropic", __name__)
errors.init_blueprint(bp)


@bp.post("/v1/messages")
@documented(doc.MESSAGES)
@routed(streams=True)
def create_message() -> Response:
    """Answer the conversation with a Message, or its event stream."""
    asked = parse_request(messages_request_schema, MessagesRequest)
    engine, inputs = generating_engine(), plan_inputs()
    config = inputs.config
    skipped_tools.skip(asked.skipped_tools)
    if asked.mcp_servers:  # the MCP connector: the server calls tools for the model
        return mcp_connector.respond(engine, asked, inputs)
    tokenizer = engine.tokenizer
    chat, edits = context_edits.applied(
        asked.chat,
        lambda text: len(tokenizer.tokenize(text, add_special=False, parse_special=False)),
        lambda c: len(conversation.prompt(tokenizer, c, config).tokens),
    )
    job = plan_chat(tokenizer, chat, inputs, prompt_param="messages", bound=window.bound(config))
    chat, prompt, fitted = job.chat, job.prompt, job.fitted
    pinned = _pinned(tokenizer, fitted, asked.marked, config)
    # A stream's message_start waits for the prompt's start, which says what the cache held.
    requests = [replace(each, progress=chat.stream) for each in job.plans]
    if pinned:  # the host cache keeps the pinned prefix over others a while
        pin = PinnedPrefix(pinned, asked.pin_seconds)
        requests = [replace(each, pin=pin) for each in requests]
    shape = Shape(
        sealer=sealing.current(),
        shown=chat.reasoning_shown,
        window_bound=job.bounded,
        edits=edits if asked.context_management else None,
        progress=chat.return_progress,
    )
    presenter = MessagesPresenter(config.model_id, len(prompt.tokens), prompt.reader, pinned, shape)
    locate = prompt_places.locator(tokenizer, chat, config)
    answer = generate(engine, chat.stream, requests, presenter, len(prompt.tokens), locate=locate)
    return overflow.reported(answer, fitted)


def _pinned(
    tokenizer: Tokenizer, fitted: overflow.Fitted, marked: Callable[[], ChatRequest] | None, config: Config
) -> int:
    """The prompt tokens up to the request's last `cache_control` breakpoint (pins.py); none
    counted for a prompt with media, or one whose oldest turns were dropped."""
    if marked is None or fitted.prompt.media or fitted.dropped_messages:
        return 0
    marked_text = conversation.prompt(tokenizer, marked(), config).text
    return pins.pinned_tokens(marked_text, fitted.prompt.tokens, tokenizer.chat_tokens)


@bp.post("/v1/messages/count_tokens")
@documented(doc.COUNT_TOKENS)
@routed()
def count_tokens() -> Response:
    """How many tokens the conversation takes after the chat template, tools included."""
    chat = parse_request(count_tokens_request_schema, ChatRequest)
    tokenizer, config = generating_engine().tokenizer, current_config()
    edited, edits = context_edits.applied(
        chat,
        lambda text: len(tokenizer.tokenize(text, add_special=False, parse_special=False)),
        lambda c: len(conversation.prompt(tokenizer, c, config).tokens),
    )
    counted: dict[str, Any] = {"input_tokens": len(conversation.prompt(tokenizer, edited, config).tokens)}
    if edits:  # as Anthropic counts a request whose edits clear something: before them too
        counted["context_management"] = {
            "original_input_tokens": len(conversation.prompt(tokenizer, chat, config).tokens)
        }
    return jsonify(counted)
