"""An Ollama request in the terms the rest of the API already speaks: chat messages and chat fields."""

from __future__ import annotations

import json
from typing import Any

from app.api.http.errors import ContextLengthError, InvalidRequestError
from app.settings.config import Config

# Ollama's options that are chat-completion fields of the same meaning (llama.cpp's samplers).
_SAME = (
    "temperature", "top_k", "top_p", "min_p", "typical_p", "seed", "stop", "repeat_penalty", "repeat_last_n",
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


def chat_body(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions fields this request amounts to, for planning, tools and grammars."""
    options = body.get("options") or {}
    chat: dict[str, Any] = {key: options[key] for key in _SAME if options.get(key) is not None}
    predict = options.get("num_predict")
    chat["max_tokens"] = predict if predict is not None and predict > 0 else None  # -1, -2: the context
    fmt = body.get("format")
    if fmt == "json":
        chat["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": "format", "schema": fmt}}
    if body.get("tools"):
        chat["tools"], chat["tool_choice"] = body["tools"], "auto"
    think = body.get("think")
    if think is not None:
        chat["chat_template_kwargs"] = {"enable_thinking": think is not False}
        if isinstance(think, str):
            chat["reasoning_effort"] = think
    return chat


def fit_context(chat: dict[str, Any], body: dict[str, Any], prompt_tokens: int, config: Config) -> None:
    """Hold the request to `options.num_ctx` (Ollama's context for it): never above the server's, and
    the prompt plus what it may generate within it."""
    asked = (body.get("options") or {}).get("num_ctx")
    if asked is None:
        return
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
    if chat.get("max_tokens") is None or chat["max_tokens"] > room:
        chat["max_tokens"] = min(room, config.max_tokens_limit)
