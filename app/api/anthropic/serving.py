"""Anthropic's Messages served: the conversation edited, planned, generated and presented as a Message
or its events, and counted (the views in routes.py parse; this turns a typed request into its answer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from flask import Response

from app.api.anthropic import mcp_connector, pins, window
from app.api.anthropic.presenter import MessagesPresenter, Shape
from app.api.anthropic.request import MessagesRequest
from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import generate
from app.api.generation.served import plan_inputs
from app.api.http import sealing, skipped_tools
from app.api.http.body import generating_engine
from app.api.prompting import context_edits, conversation, overflow, prompt_places
from app.api.prompting.context_edits import Applied
from app.api.requests.chat import ChatRequest
from app.engine.tokenizer import Tokenizer
from app.engine.types import PinnedPrefix
from app.settings.config import Config
from app.settings.current import current_config


def message(asked: MessagesRequest) -> Response:
    """The Message answering the conversation, or its event stream."""
    engine, inputs = generating_engine(), plan_inputs()
    config = inputs.config
    skipped_tools.skip(asked.skipped_tools)
    if asked.mcp_servers:  # the MCP connector: the server calls tools for the model
        return mcp_connector.respond(engine, asked, inputs)
    tokenizer = engine.tokenizer
    chat, edits = _edited(tokenizer, asked.chat, config)
    job = plan_chat(tokenizer, chat, inputs, prompt_param="messages", bound=window.bound(config))
    chat, prompt, fitted = job.chat, job.prompt, job.fitted
    pinned = _pinned(tokenizer, fitted, asked.marked, config)
    # A stream's message_start waits for the prompt's start, which says what the cache held.
    plans = [replace(each, progress=chat.stream) for each in job.plans]
    if pinned:  # the host cache keeps the pinned prefix over others a while
        pin = PinnedPrefix(pinned, asked.pin_seconds)
        plans = [replace(each, pin=pin) for each in plans]
    shape = Shape(
        sealer=sealing.current(),
        shown=chat.reasoning_shown,
        window_bound=job.bounded,
        edits=edits if asked.context_management else None,
        progress=chat.return_progress,
    )
    presenter = MessagesPresenter(config.model_id, len(prompt.tokens), prompt.reader, pinned, shape)
    locate = prompt_places.locator(tokenizer, chat, config)
    answer = generate(engine, chat.stream, plans, presenter, len(prompt.tokens), locate=locate)
    return overflow.reported(answer, fitted)


def counted(chat: ChatRequest) -> dict[str, Any]:
    """The tokens the conversation takes after the chat template and its context edits."""
    tokenizer, config = generating_engine().tokenizer, current_config()
    edited, edits = _edited(tokenizer, chat, config)
    answer: dict[str, Any] = {"input_tokens": len(conversation.prompt(tokenizer, edited, config).tokens)}
    if edits:  # as Anthropic counts a request whose edits clear something: before them too
        answer["context_management"] = {
            "original_input_tokens": len(conversation.prompt(tokenizer, chat, config).tokens)
        }
    return answer


def _edited(tokenizer: Tokenizer, chat: ChatRequest, config: Config) -> tuple[ChatRequest, list[Applied]]:
    """`chat` after its `context_management` edits, which count tokens as the prompt will hold them."""
    return context_edits.applied(
        chat,
        lambda text: len(tokenizer.tokenize(text, add_special=False, parse_special=False)),
        lambda c: len(conversation.prompt(tokenizer, c, config).tokens),
    )


def _pinned(
    tokenizer: Tokenizer, fitted: overflow.Fitted, marked: Callable[[], ChatRequest] | None, config: Config
) -> int:
    """The prompt tokens up to the request's last `cache_control` breakpoint (pins.py); none
    counted for a prompt with media, or one whose oldest turns were dropped."""
    if marked is None or fitted.prompt.media or fitted.dropped_messages:
        return 0
    marked_text = conversation.rendered(tokenizer, marked(), config)  # its text only: never tokenized whole
    made = fitted.prompt
    spelt = lambda prefix: tokenizer.spelt_within(made.text, made.tokens, prefix)  # noqa: E731
    return pins.pinned_tokens(marked_text, made.tokens, tokenizer.chat_tokens, spelt)
