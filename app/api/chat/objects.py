"""The OpenAI response objects: completions, chunks and usage, for chat and text alike."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any


def usage(prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> dict[str, Any]:
    """OpenAI's usage object; `cached_tokens` of the prompt were served from the KV cache."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


@dataclass
class FinishedChoice:
    """One finished choice of a non-streamed answer."""

    index: int
    text: str = ""
    finish_reason: str = "length"
    logprobs: dict[str, Any] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    reasoning: str = ""  # the model's thinking, split from `text` (llama-server's reasoning_content)


@dataclass
class ObjectHeader:
    """What one endpoint's objects look like; the same id, created and model in every chunk."""

    model: str
    chat: bool
    fingerprint: str = ""
    id: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        prefix = "chatcmpl-" if self.chat else "cmpl-"
        self.id = self.id or prefix + uuid.uuid4().hex

    def _envelope(self, object_name: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": object_name,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": choices,
        }

    def completion(self, choices: list[FinishedChoice], tokens: dict[str, int]) -> dict[str, Any]:
        """The whole, non-streamed response."""
        body = self._envelope(
            "chat.completion" if self.chat else "text_completion",
            [self._choice(choice) for choice in sorted(choices, key=lambda c: c.index)],
        )
        body["usage"] = tokens
        return body

    def _choice(self, choice: FinishedChoice) -> dict[str, Any]:
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": choice.text, "refusal": None}
            if choice.reasoning:
                message["reasoning_content"] = choice.reasoning
            if choice.tool_calls:
                message["content"] = choice.text or None
                message["tool_calls"] = choice.tool_calls
            return {
                "index": choice.index,
                "message": message,
                "logprobs": choice.logprobs,
                "finish_reason": choice.finish_reason,
            }
        return {
            "index": choice.index,
            "text": choice.text,
            "logprobs": choice.logprobs,
            "finish_reason": choice.finish_reason,
        }

    def chunk(
        self,
        text: str | None,
        finish_reason: str | None = None,
        *,
        index: int = 0,
        first: bool = False,
        logprobs: dict[str, Any] | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        reasoning: str | None = None,
    ) -> dict[str, Any]:
        """One streamed chunk of choice `index`; `text=None` with a finish reason closes it."""
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if first else {}
            if reasoning is not None:
                delta["reasoning_content"] = reasoning
            if text is not None:
                delta["content"] = text
            if tool_calls:
                delta["tool_calls"] = tool_calls
            choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
        else:
            choice = {
                "index": index,
                "text": text or "",
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }
        return self._envelope(self._chunk_object, [choice])

    def usage_chunk(self, tokens: dict[str, int]) -> dict[str, Any]:
        """The last chunk of a stream with `include_usage`: no choices, only usage."""
        body = self._envelope(self._chunk_object, [])
        body["usage"] = tokens
        return body

    @property
    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"
