"""OpenAI's transcription answers: JSON, text, subtitles or verbose JSON; `transcript.text.*` events."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flask import Response, jsonify

from app.api.audio import transcripts
from app.api.generation.loop import ChoiceResult
from app.api.http import sse
from app.api.http.errors import APIError
from app.chat_formats.answer import AnswerReader, DeltaStream
from app.engine.types import Chunk, TokenLogprob


@dataclass(frozen=True)
class TranscriptionFacts:
    """What the request asked and what is known of its clip, beside the generated text."""

    response_format: str
    language: str | None
    duration: float  # seconds, from the file's header
    temperature: float
    prompt_tokens: int
    audio_tokens: int
    logprobs: bool  # include[]=logprobs
    reader: AnswerReader  # the transcript is the answer's content (reasoning left out), as llama-server's


class TranscriptionPresenter:
    """One transcript, whole in the asked format or streamed as OpenAI streams it."""

    def __init__(self, facts: TranscriptionFacts) -> None:
        self.facts = facts

    def build(self, choices: list[ChoiceResult]) -> dict[str, Any]:
        """The whole answer as JSON (`whole_response` turns it into the asked format)."""
        facts, result = self.facts, choices[0]
        text = self._content(result.text)
        if facts.response_format == "verbose_json":
            scores = [e.logprob for e in result.logprobs if e.logprob is not None]
            tokens = [e.token for e in result.logprobs]
            return transcripts.verbose(
                text, facts.language, facts.duration, tokens, scores, facts.temperature
            )
        answer: dict[str, Any] = {"text": text, "usage": self._usage(result)}
        if facts.logprobs:
            answer["logprobs"] = _logprobs(result.logprobs)
        return answer

    def whole_response(self, answer: dict[str, Any]) -> Response:
        """JSON for json and verbose_json; the transcript as plain text or subtitles otherwise."""
        kind = self.facts.response_format
        if kind in ("json", "verbose_json"):
            return jsonify(answer)
        text = str(answer["text"])
        if kind == "text":
            return Response(text + "\n", mimetype="text/plain")
        return Response(transcripts.subtitles(text, self.facts.duration, kind), mimetype="text/plain")

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """`transcript.text.delta` as text comes (held back while it may be reasoning markup), then
        `transcript.text.done` with the whole transcript and the usage."""
        reading = DeltaStream(self.facts.reader)
        result = ChoiceResult(0)
        pending: list[TokenLogprob] = []
        for chunk in chunks:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            result.add(chunk)
            pending.extend(chunk.logprobs)
            for delta in reading.update(result.text, chunk.finish_reason is not None):
                if delta.kind == "content" and delta.text:
                    event: dict[str, Any] = {"type": "transcript.text.delta", "delta": delta.text}
                    if self.facts.logprobs:
                        event["logprobs"], pending = _logprobs(pending), []
                    yield sse.event(event)
            if chunk.finish_reason is not None:
                done: dict[str, Any] = {"type": "transcript.text.done", "text": self._content(result.text)}
                if self.facts.logprobs:
                    done["logprobs"] = _logprobs(result.logprobs)
                yield sse.event(done | {"usage": self._usage(result)})
        yield sse.DONE

    def failure(self, error: APIError) -> bytes:
        """After the 200: one data event holding the error, as the chat stream ends."""
        body = error.body()
        body["error"].pop("param")
        return sse.event(body)

    def _content(self, text: str) -> str:
        reader = self.facts.reader
        return text if reader.plain else reader.read(text, partial=False).content

    def _usage(self, result: ChoiceResult) -> dict[str, Any]:
        facts = self.facts
        return {
            "type": "tokens",
            "input_tokens": facts.prompt_tokens,
            "input_token_details": {
                "text_tokens": facts.prompt_tokens - facts.audio_tokens,
                "audio_tokens": facts.audio_tokens,
                "cached_tokens": result.cached_tokens,
            },
            "output_tokens": result.completion_tokens,
            "total_tokens": facts.prompt_tokens + result.completion_tokens,
        }


def _logprobs(entries: list[TokenLogprob]) -> list[dict[str, Any]]:
    """OpenAI's transcription logprobs: each token's text, log-probability and bytes."""
    return [
        {"token": e.piece.decode(errors="replace"), "logprob": e.logprob, "bytes": list(e.piece)}
        for e in entries
        if e.logprob is not None
    ]
