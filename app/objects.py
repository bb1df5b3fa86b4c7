"""The OpenAI response objects: completions, chunks and usage, for chat and text alike."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's usage object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


@dataclass
class Shape:
    """What one endpoint's objects look like; the same id, created and model in every chunk."""

    model: str
    chat: bool
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
            "system_fingerprint": None,
            "choices": choices,
        }

    def completion(self, text: str, finish_reason: str, tokens: dict[str, int]) -> dict[str, Any]:
        """The whole, non-streamed response."""
        if self.chat:
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
        body = self._envelope("chat.completion" if self.chat else "text_completion", [choice])
        body["usage"] = tokens
        return body

    def chunk(
        self, text: str | None, finish_reason: str | None = None, *, first: bool = False
    ) -> dict[str, Any]:
        """One streamed chunk; `text=None` with a finish reason is the closing chunk."""
        if self.chat:
            delta: dict[str, Any] = {"role": "assistant"} if first else {}
            if text is not None:
                delta["content"] = text
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        else:
            choice = {
                "index": 0,
                "text": text or "",
                "logprobs": None,
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
