"""Ollama's answers: /api/chat's message and /api/generate's response, whole or as NDJSON lines.

Each streamed line is one object (`done: false`, a piece of the text or thinking), the
last has `done: true`, `done_reason` and the durations in nanoseconds, measured here:
from the request's arrival to its first token (prompt evaluation, queueing included),
then to the last. Tool calls go on one line of their own, whole, as Ollama sends them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from flask import g

from app.api.generation import logprobs
from app.api.generation.loop import ChoiceResult
from app.api.http.errors import APIError
from app.api.ollama import ndjson
from app.chat_formats.answer import AnswerReader, DeltaStream
from app.chat_formats.base import ToolCall
from app.engine.types import Chunk, TokenLogprob

NS = 1_000_000_000


class OllamaPresenter:
    """One answer of /api/chat (`chat`) or /api/generate, read for calls and thinking."""

    stream_response = staticmethod(ndjson.stream_response)

    def __init__(
        self, model: str, prompt_tokens: int, reader: AnswerReader, chat: bool, logprobs: bool = False
    ) -> None:
        self.model, self.prompt_tokens, self.reader, self.chat = model, prompt_tokens, reader, chat
        # `logprobs`: each line carries its tokens' log-probabilities (those of tokens whose text
        # is held back ride on the next line that carries text), the whole answer all of them.
        self.logprobs = logprobs
        self._pending: list[TokenLogprob] = []
        # How the answer reads when its calls are none Ollama's clients could take (see _calls).
        self.as_text = dataclasses.replace(reader, functions=(), forced=False)
        stats = getattr(g, "stats", None)
        # Durations count from when the model was ready (an on-demand model may have loaded
        # first: that wait is `load_duration`, and part of `total_duration`).
        self.load = float(g.get("load_seconds", 0.0))
        ready_at = g.get("model_ready_at")
        self.started = ready_at if ready_at is not None else stats.started if stats else time.monotonic()
        self.first: float | None = None

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The whole answer."""
        (result,) = results
        stats = getattr(g, "stats", None)
        if stats is not None and stats.ttft is not None:
            self.first = max(stats.started + stats.ttft, self.started)
        parsed = self.reader.read(result.text, partial=False)
        calls = _calls(parsed.calls)
        if calls is None:
            parsed = self.as_text.read(result.text, partial=False)
        return (
            self._done(result)
            | self._piece(parsed.content, parsed.reasoning, calls or [])
            | self._scored(result.logprobs)
        )

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """A line per piece of text or thinking as it is read, the calls whole, then the last line."""
        result, stream, sent = ChoiceResult(0), DeltaStream(self.reader), ""
        for chunk in chunks:
            if chunk is None:
                continue  # no keep-alives: Ollama's clients parse every line as JSON
            if self.first is None and chunk.text:
                self.first = time.monotonic()
            result.add(chunk)
            self._pending.extend(chunk.logprobs)
            for delta in stream.update(result.text, chunk.finish_reason is not None):
                if delta.kind == "content" and delta.text:
                    sent += delta.text
                    yield self._line(self._piece(delta.text, "", []))
                elif delta.kind == "reasoning" and delta.text:
                    yield self._line(self._piece("", delta.text, []))
        calls = _calls(stream.last.calls)
        if calls:
            yield self._line(self._piece("", "", calls))
        elif calls is None:  # held back as calls, but none a client could take: the text after all
            text = self.as_text.read(result.text, partial=False).content
            if text.startswith(sent) and len(text) > len(sent):
                yield self._line(self._piece(text[len(sent) :], "", []))
        yield ndjson.line(self._done(result) | self._piece("", "", []) | self._scored(self._pending))

    def _line(self, piece: dict[str, Any]) -> bytes:
        """A line of the stream, with the log-probabilities of the tokens since the last line."""
        line = ndjson.line(self._head(False) | piece | self._scored(self._pending))
        self._pending = []
        return line

    def _scored(self, entries: list[TokenLogprob]) -> dict[str, Any]:
        """Ollama's `logprobs` for `entries` (nothing unless asked for)."""
        return {"logprobs": logprobs.chat(entries)["content"]} if self.logprobs else {}

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
            "total_duration": int((now - self.started + self.load) * NS),
            "load_duration": int(self.load * NS),
            "prompt_eval_count": self.prompt_tokens - result.cached_tokens,
            "prompt_eval_duration": int((first - self.started) * NS),
            "eval_count": result.completion_tokens,
            "eval_duration": int((now - first) * NS),
        }


def now() -> str:
    """Ollama's `created_at`: UTC, RFC 3339."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _calls(calls: list[ToolCall]) -> list[dict[str, Any]] | None:
    """Ollama's `tool_calls`, or None if one is cut off or its arguments are no JSON object.

    Ollama's clients take `arguments` as an object (the Python library's types refuse anything
    else), and Ollama itself only reports calls it could parse: the rest stays text.
    """
    shaped = []
    for call in calls:
        try:
            arguments = json.loads(call.arguments) if call.arguments else {}
        except ValueError:
            return None
        if not call.complete or not isinstance(arguments, dict):
            return None
        shaped.append({"function": {"name": call.name, "arguments": arguments}})
    return shaped
