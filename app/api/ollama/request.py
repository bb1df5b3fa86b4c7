"""An Ollama chat or generate request as its view needs it: the chat it amounts to, and what only
Ollama's API asks (the name as written, keep_alive, num_ctx, and generate's raw prompt or suffix)."""

from __future__ import annotations

from dataclasses import dataclass

from app.api.requests.chat import ChatRequest


@dataclass(frozen=True)
class OllamaRequest:
    """`POST /api/chat` or `/api/generate`, validated: nothing of it is read from the body again."""

    chat: ChatRequest
    named: str  # the model as the client wrote it (`name:latest`), which answers echo
    keep_alive: float | None = None  # seconds to keep an on-demand model once idle
    thinks: bool = False  # `think` asked for (true, or an effort)
    num_ctx: int | None = None  # options.num_ctx: the context the client gives the request
    # /api/generate's own: its prompt, made by the chat template unless `raw` or given a suffix.
    prompt: str = ""
    suffix: str | None = None
    raw: bool = False

    @property
    def model(self) -> str | None:
        return self.chat.model
