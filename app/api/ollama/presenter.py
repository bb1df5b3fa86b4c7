"""Ollama's answers: /api/chat's message and /api/generate's response, whole or as NDJSON lines.

Each streamed line is one object (`done: false`, a piece of the text or thinking), the
last has `done: true`, `done_reason` and the durations in nanoseconds, measured here:
from the request's arrival to its first token (prompt evaluation, queueing included),
then to the last. Tool calls go on one line of their own, whole, as Ollama sends them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from flask import g

from app.api.common.errors import APIError
from app.api.common.generate import ChoiceResult
from app.api.ollama import ndjson
from app.chat_formats.answer import AnswerReader, DeltaStream
from app.engine.types import Chunk

NS = 1_000_000_000


class OllamaPresenter:
    """One answer of /api/chat (`chat`) or /api/generate, read for calls and thinking."""

    stream_response = staticmethod(ndjson.stream_response)

    def __init__(self, model: str, prompt_tokens: int, reader: AnswerReader, chat: bool) -> None:
        self.model, self.prompt_tokens, self.reader, self.chat = model, prompt_tokens, reader, chat
        stats = getattr(g, "stats", None)
        self.started = stats.started if stats is not None else time.monotonic()
        self.first: float | None = None

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The whole answer."""
        (result,) = results
        stats = getattr(g, "stats", None)
        if stats is not None and stats.ttft is not None:
            self.first = stats.started + stats.ttft
        parsed = self.reader.read(result.text, partial=False)
        calls = [{"function": {"name": c.name, "arguments": _arguments(c.arguments)}} for c in parsed.calls]
        return self._done(result) | self._piece(parsed.content, parsed.reasoning, calls)

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """A line per piece of text or thinking as it is read, the calls whole, then the last line."""
        result, stream = ChoiceResult(0), DeltaStream(self.reader)
        for chunk in chunks:
            if chunk is None:
                continue  # no keep-alives: Ollama's clients parse every line as JSON
            if self.first is None and chunk.text:
                self.first = time.monotonic()
            result.add(chunk)
            for delta in stream.update(result.text, chunk.finish_reason is not None):
                if delta.kind == "content" and delta.text:
                    yield ndjson.line(self._head(False) | self._piece(delta.text, "", []))
                elif delta.kind == "reasoning" and delta.text:
                    yield ndjson.line(self._head(False) | self._piece("", delta.text, []))
        calls = stream.last.calls
        if calls:
            shaped = [{"function": {"name": c.name, "arguments": _arguments(c.arguments)}} for c in calls]
            yield ndjson.line(self._head(False) | self._piece("", "", shaped))
        yield ndjson.line(self._done(result) | self._piece("", "", []))

    def failure(self, error: APIError) -> bytes:
        """After the 200: a line holding the error (Ollama's clients raise it)."""
        return ndjson.line({"error": error.message})

    def _head(self, done: bool) -> dict[str, Any]:
        return {"model": self.model, "created_at": now(), "done": done}

    def _piece(self, text: str, thinking: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if thinking:
                message["thinking"] = thinking
            if calls:
                message["tool_calls"] = calls
            return {"message": message}
        return {"response": text, **({"thinking": thinking} if thinking else {})}

    def _done(self, result: ChoiceResult) -> dict[str, Any]:
        now = time.monotonic()
        first = self.first if self.first is not None else now
        return self._head(True) | {
            "done_reason": "length" if result.finish_reason == "length" else "stop",
            "total_duration": int((now - self.started) * NS),
            "load_duration": 0,
            "prompt_eval_count": self.prompt_tokens - result.cached_tokens,
            "prompt_eval_duration": int((first - self.started) * NS),
            "eval_count": result.completion_tokens,
            "eval_duration": int((now - first) * NS),
        }


def now() -> str:
    """Ollama's `created_at`: UTC, RFC 3339."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:  # a model that wrote broken JSON: hand it over as text
        return text
