"""llama-server's own completion answer (`/completion`): content, stop type, timings, token probabilities.

The whole answer is one JSON object; the stream is `data:` events of each piece of text and
its token ids (`stop: false`, with each token's probabilities when `n_probs` asks), then the
final object with `stop: true` whose `content` is empty (a client joins the events' pieces),
and no `[DONE]`, as llama-server sends them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from app.api.generation import timings
from app.api.generation.loop import ChoiceResult
from app.api.http import sse
from app.api.http.errors import APIError
from app.engine.types import Chunk, TokenLogprob


@dataclass(frozen=True)
class LlamaCompletionFacts:
    """What the request asked of the answer, beyond the chunks."""

    model: str
    prompt: str
    prompt_tokens: int
    n_probs: int
    return_tokens: bool
    settings: dict[str, Any]  # the generation settings echoed back
    n_ctx: int  # the context a request may fill: an answer that fills it was truncated
    timings_per_token: bool = False  # `timings` on every streamed event, not only the last


class LlamaPresenter:
    """llama-server's non-OpenAI completion object, and its stream."""

    def __init__(self, answer: LlamaCompletionFacts) -> None:
        self.answer = answer
        self.stats = timings.current()  # kept: a stream's events are made outside the request's context

    def build(self, results: list[ChoiceResult]) -> dict[str, Any] | list[dict[str, Any]]:
        """The whole answer, with every token's probabilities when `n_probs` asked; several
        (`n_cmpl`) are a list of them, each with its `index`, as llama-server answers."""
        wholes = []
        for result in results:
            whole = self._final(result, streamed=False)
            if self.answer.n_probs:
                whole["completion_probabilities"] = [self._token(entry) for entry in result.logprobs]
            wholes.append(whole)
        return wholes[0] if len(wholes) == 1 else wholes

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """One event per chunk of text (with its tokens' probabilities), then each completion's
        whole answer as it ends; several completions' events interleave, told apart by `index`."""
        results: dict[int, ChoiceResult] = {}
        for chunk in chunks:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            result = results.setdefault(chunk.index, ChoiceResult(chunk.index))
            result.add(chunk)
            if chunk.progress is not None:
                yield sse.event(self._progress(chunk))
            if chunk.text or chunk.logprobs:
                event: dict[str, Any] = {
                    "index": chunk.index, "content": chunk.text,
                    "tokens": [entry.token for entry in chunk.logprobs], "stop": False, "id_slot": -1,
                    "tokens_predicted": chunk.completion_tokens,
                    "tokens_evaluated": self.answer.prompt_tokens,
                }  # fmt: skip
                if self.answer.n_probs:
                    event["completion_probabilities"] = [self._token(entry) for entry in chunk.logprobs]
                if self.answer.timings_per_token:
                    event["timings"] = timings.of_request(self.answer.prompt_tokens, self.stats)
                yield sse.event(event)
            if chunk.finish_reason is not None:
                yield sse.event(self._final(result, streamed=True))

    def _progress(self, chunk: Chunk) -> dict[str, Any]:
        """How far the prompt is evaluated, as llama-server streams it with `return_progress`."""
        return {
            "index": chunk.index, "content": "", "tokens": [], "stop": False, "id_slot": -1,
            "tokens_predicted": 0, "tokens_evaluated": self.answer.prompt_tokens,
            "prompt_progress": asdict(chunk.progress) if chunk.progress is not None else None,
        }  # fmt: skip

    def failure(self, error: APIError) -> bytes:
        """After the 200: one event holding the error, as llama-server sends one."""
        return sse.event(error.body())

    def _final(self, result: ChoiceResult, streamed: bool) -> dict[str, Any]:
        """The last object; streamed, without the text and ids the events before it carried."""
        answer, text = self.answer, result.text
        # As llama-server: generation that ran into the end of the context (not only n_predict).
        truncated = answer.prompt_tokens + result.completion_tokens >= answer.n_ctx
        if result.finish_reason == "length":
            stop_type, word = "limit", ""
        elif result.stop_sequence is not None:
            stop_type, word = "word", result.stop_sequence
        else:
            stop_type, word = "eos", ""
        return {
            "index": result.index, "content": "" if streamed else text, "id_slot": -1, "stop": True,
            "tokens": [] if streamed else self._ids(result.logprobs),
            "model": answer.model, "tokens_predicted": result.completion_tokens,
            "tokens_evaluated": answer.prompt_tokens, "generation_settings": answer.settings,
            "prompt": answer.prompt, "has_new_line": "\n" in text, "truncated": truncated,
            "stop_type": stop_type, "stopping_word": word, "tokens_cached": result.cached_tokens,
            "timings": timings.figures(
                answer.prompt_tokens - result.cached_tokens, result.cached_tokens, result.completion_tokens,
                *timings.durations(self.stats),
            ),
        }  # fmt: skip

    def _ids(self, entries: list[TokenLogprob] | tuple[TokenLogprob, ...]) -> list[int]:
        return [entry.token for entry in entries] if self.answer.return_tokens else []

    def _token(self, entry: TokenLogprob) -> dict[str, Any]:
        top = [_piece(token, piece, logprob) for token, piece, logprob in entry.top[: self.answer.n_probs]]
        return {**_piece(entry.token, entry.piece, entry.logprob), "top_logprobs": top}


def _piece(token: int, piece: bytes, logprob: float | None) -> dict[str, Any]:
    # As llama-server: the text cut before an incomplete UTF-8 sequence, the bytes whole.
    return {"id": token, "token": piece.decode("utf-8", errors="ignore"), "bytes": list(piece),
            "logprob": logprob}  # fmt: skip
