"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from flask import Blueprint, Response, jsonify, request

from app.api.anthropic import cache_marks, errors, mcp_connector, window
from app.api.anthropic import openapi as doc
from app.api.anthropic.presenter import MessagesPresenter, Shape
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
from app.engine.types import KeepPrefix
from app.settings.config import Config
from app.settings.current import current_config

bp = Blueprint("anthropic", __name__)
errors.init_blueprint(bp)


@bp.post("/v1/messages")
@documented(doc.MESSAGES)
@routed(streams=True)
def create_message() -> Response:
    """Answer the conversation with a Message, or its event stream."""
    chat = parse_request(messages_request_schema, ChatRequest)
    engine, inputs = generating_engine(), plan_inputs()
    config = inputs.config
    body = request.get_json(force=True)  # as parsed for the view (cached)
    skipped_tools.skip([t["type"] for t in body.get("tools") or [] if _server_tool(t)])
    if body.get("mcp_servers"):  # the MCP connector: the server calls tools for the model
        return mcp_connector.respond(engine, chat, body, inputs)
    tokenizer = engine.tokenizer
    chat, edits = context_edits.applied(
        chat,
        lambda text: len(tokenizer.tokenize(text, add_special=False, parse_special=False)),
        lambda c: len(conversation.prompt(tokenizer, c, config).tokens),
    )
    job = plan_chat(tokenizer, chat, inputs, prompt_param="messages", bound=window.bound(config))
    chat, prompt, fitted = job.chat, job.prompt, job.fitted
    marked = _covered(tokenizer, fitted, config)
    # A stream's message_start waits for the prompt's start, which says what the cache held.
    requests = [replace(each, progress=chat.stream) for each in job.requests]
    if marked:  # the prefix is asked to stay cached: the host cache keeps it over others a while
        keep = KeepPrefix(marked, cache_marks.kept_seconds(body))
        requests = [replace(each, keep=keep) for each in requests]
    shape = Shape(
        sealer=sealing.current(),
        shown=chat.reasoning_shown,
        window_bound=job.bounded,
        edits=edits if body.get("context_management") else None,
        progress=chat.return_progress,
    )
    presenter = MessagesPresenter(config.model_id, len(prompt.tokens), prompt.reader, marked, shape)
    locate = prompt_places.locator(tokenizer, chat, config)
    answer = generate(engine, chat.stream, requests, presenter, len(prompt.tokens), locate=locate)
    return overflow.reported(answer, fitted)


def _server_tool(tool: object) -> bool:
    """A tool Anthropic runs itself (web search, code execution...), which this server leaves out."""
    return isinstance(tool, dict) and tool.get("type", "custom") not in ("custom", "mcp_toolset")


def _covered(tokenizer: Tokenizer, fitted: overflow.Fitted, config: Config) -> int:
    """The prompt tokens up to the request's last `cache_control` breakpoint (cache_marks.py); none
    counted for a prompt with media, or one whose oldest turns were dropped."""
    if fitted.prompt.media or fitted.dropped_messages:
        return 0
    body = request.get_json(force=True)  # as parsed for the view (cached)

    def render(marked: dict[str, Any]) -> str:
        return conversation.prompt(tokenizer, messages_request_schema.load(marked), config).text

    return cache_marks.covered_tokens(body, fitted.prompt.tokens, render, tokenizer.chat_tokens)


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
