"""An Ollama request as the typed chat request the rest of the API already serves: messages and fields."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.api.ollama.request import OllamaRequest
from app.api.requests.chat import ChatRequest
from app.api.requests.generation import sampling_of
from app.settings.config import Config

# Ollama's options that are llama.cpp's sampling settings of the same name and meaning.
_SAME = (
    "temperature", "top_k", "top_p", "min_p", "typical_p", "seed", "repeat_penalty", "repeat_last_n",
    "presence_penalty", "frequency_penalty", "mirostat", "mirostat_tau", "mirostat_eta",
)  # fmt: skip


def messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Ollama's messages as chat messages: calls get ids, and each tool result answers the oldest call
    of its tool not yet answered (Ollama names a result's tool, not its call)."""
    conversation: list[dict[str, Any]] = []
    unanswered: list[tuple[str, str]] = []  # (call id, tool name)
    for message in body["messages"]:
        turn: dict[str, Any] = {"role": message["role"], "content": message["content"]}
        if message["role"] == "assistant" and message.get("tool_calls"):
            calls: list[dict[str, Any]] = []
            for call in message["tool_calls"]:
                call_id = f"call_{len(conversation)}_{len(calls)}"
                name = call["function"]["name"]
                arguments = json.dumps(call["function"]["arguments"])
                calls.append(
                    {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                )
                unanswered.append((call_id, name))
            turn["tool_calls"], turn["content"] = calls, message["content"] or None
        if message["role"] == "assistant" and message.get("thinking"):
            turn["reasoning_content"] = message["thinking"]
        if message["role"] == "tool":
            named = message.get("tool_name")
            match = next((pair for pair in unanswered if named in (None, pair[1])), None)
            if match is not None:
                unanswered.remove(match)
            turn["tool_call_id"] = match[0] if match else f"call_{len(conversation)}"
        conversation.append(turn)
    return conversation


def generate_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """/api/generate's `system` and `prompt` as a conversation for the chat template."""
    turns = [{"role": "system", "content": body["system"]}] if body.get("system") else []
    return [*turns, {"role": "user", "content": body["prompt"]}]


def as_chat(body: dict[str, Any], conversation: list[dict[str, Any]]) -> ChatRequest:
    """The chat request an Ollama request (with `conversation`, its messages) amounts to."""
    options = body.get("options") or {}
    predict = options.get("num_predict")
    fmt, think = body.get("format"), body.get("think")
    response_format: dict[str, Any] | None = None
    if fmt == "json":
        response_format = {"type": "json_object"}
    elif isinstance(fmt, dict):
        response_format = {"type": "json_schema", "json_schema": {"name": "format", "schema": fmt}}
    return ChatRequest(
        model=body.get("model"),
        messages=conversation,
        max_tokens=predict if predict is not None and predict > 0 else None,  # -1, -2: the context
        sampling=sampling_of({key: options.get(key) for key in _SAME}),
        stop=tuple(options.get("stop") or ()),
        stream=bool(body.get("stream")),
        response_format=response_format,
        format_params=("format", "format"),
        tools=body.get("tools") or [],
        tool_choice="auto" if body.get("tools") else None,
        chat_template_kwargs={"enable_thinking": think is not False} if think is not None else {},
        reasoning_effort=think if isinstance(think, str) else None,
        logprobs=bool(body.get("logprobs")),
        top_logprobs=body.get("top_logprobs") or 0,
    )


def chat_request(body: dict[str, Any]) -> OllamaRequest:
    """A validated /api/chat body as the typed request its view serves."""
    return _typed(body, messages(body))


def generate_request(body: dict[str, Any]) -> OllamaRequest:
    """A validated /api/generate body as the typed request its view serves."""
    return replace(
        _typed(body, generate_messages(body)),
        prompt=body["prompt"],
        suffix=body.get("suffix") or None,
        raw=bool(body.get("raw")),
    )


def _typed(body: dict[str, Any], conversation: list[dict[str, Any]]) -> OllamaRequest:
    return OllamaRequest(
        chat=as_chat(body, conversation),
        named=body["model"],
        keep_alive=body.get("keep_alive"),
        thinks=body.get("think") not in (None, False),
        num_ctx=(body.get("options") or {}).get("num_ctx"),
    )


def context_bound(num_ctx: int | None, config: Config) -> Callable[[ChatRequest, int], ChatRequest]:
    """`fit_context` as the chat job's bound: the request once its prompt's size is known."""
    return lambda chat, prompt_tokens: fit_context(chat, num_ctx, prompt_tokens, config)


def fit_context(chat: ChatRequest, asked: int | None, prompt_tokens: int, config: Config) -> ChatRequest:
    """`chat` held to `options.num_ctx` (`asked`, Ollama's context for it): never above the
    server's, and the prompt plus what it may generate within it."""
    if asked is None:
        return chat
    if asked > config.n_ctx:
        raise InvalidRequestError(
            f"options.num_ctx is {asked}; this server runs the model with a context of {config.n_ctx} "
            "tokens (LLM_N_CTX, or n_ctx in LLM_MODELS).",
            param="options.num_ctx",
        )
    room = asked - prompt_tokens
    if room < 1:
        raise ContextLengthError(
            f"The prompt is {prompt_tokens} tokens, more than options.num_ctx ({asked}) leaves room for.",
            param="options.num_ctx",
        )
    if chat.max_tokens is None or chat.max_tokens > room:
        return replace(chat, max_tokens=min(room, config.max_tokens_limit))
    return chat
