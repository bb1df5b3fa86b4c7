"""Assistant prefill: a conversation whose last message is the assistant's is continued, not answered anew.

As llama-server (`--prefill-assistant`, on by default; common/chat.cpp's continuation): the
messages before it are templated with the generation prompt, and the assistant's text is
written after it, so the model goes on from there and the answer holds only what it adds.
Anthropic's Messages API documents the same (a prefilled assistant turn), vLLM and llama-server
take `continue_final_message` with `add_generation_prompt: false` to ask for it explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.api.http.errors import InvalidRequestError
from app.api.requests.chat import ChatRequest


@dataclass(frozen=True)
class Continuation:
    """The messages the template renders, and the last one's text to write after its generation prompt
    (None: no continuation; the template's generation prompt is added or not as the request says)."""

    messages: list[dict[str, Any]]
    continued: dict[str, Any] | None
    generation_prompt: bool


def continuation(chat: ChatRequest, prefill_assistant: bool) -> Continuation:
    """Whether and how `chat` continues its last message; the client's contradictions are 400s."""
    messages = chat.messages
    last = messages[-1] if messages else None
    explicit = chat.continue_final_message
    if explicit and chat.add_generation_prompt is not False:
        raise InvalidRequestError(
            "continue_final_message needs add_generation_prompt: false (both cannot be true).",
            param="continue_final_message",
        )
    automatic = explicit is None and prefill_assistant and chat.add_generation_prompt is not False
    if not (explicit or (automatic and last is not None and last["role"] == "assistant")):
        return Continuation(messages, None, chat.add_generation_prompt is not False)
    if last is None or last["role"] != "assistant":
        raise InvalidRequestError(
            "continue_final_message continues an assistant message: the last message is not one.",
            param="messages",
        )
    if len(messages) >= 2 and messages[-2]["role"] == "assistant":
        raise InvalidRequestError(
            "Cannot have 2 or more assistant messages at the end of the list.", param="messages"
        )
    if last.get("tool_calls"):
        raise InvalidRequestError(
            "Cannot continue an assistant message that contains tool calls.", param="messages"
        )
    return Continuation(messages[:-1], last, True)


def continued_text(prompt: str, message: dict[str, Any], thinking_tags: tuple[str, str] | None) -> str:
    """The prompt with the continued message written after the generation prompt: where the template
    opened the model's thinking, the message's reasoning (if any) closed first, as llama-server's."""
    content = message.get("content") or ""
    if thinking_tags is not None and prompt.rstrip().endswith(thinking_tags[0]):
        opening, closing = thinking_tags
        cut = prompt.rfind(opening)
        return prompt[:cut] + opening + (message.get("reasoning_content") or "") + closing + content
    return prompt + content
