"""An Ollama request as its view needs it: a chat or generate request's chat, and what only Ollama's
API asks (the name as written, keep_alive, num_ctx, and generate's raw prompt or suffix); an embed
request's texts."""

from __future__ import annotations

from dataclasses import dataclass, replace

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

    def served_as(self, model: str) -> OllamaRequest:
        """The request for the served model its name means (`name:latest`: `name`)."""
        return replace(self, chat=replace(self.chat, model=model))


@dataclass(frozen=True)
class OllamaEmbedRequest:
    """`POST /api/embed` or the older `/api/embeddings`, validated."""

    named: str  # the model as the client wrote it, which /api/embed's answer echoes
    texts: tuple[str, ...]
    truncate: bool = True  # past the context, an input is cut (false: a 400)
    dimensions: int | None = None  # the size the client expects (this server cannot shorten a vector)
    keep_alive: float | None = None
