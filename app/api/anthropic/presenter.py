"""Anthropic's answer: the Message object, or message_start … message_stop with content block events."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

from app.api.anthropic import conversion, errors
from app.api.generation.answer_blocks import Block, BlockEvent, BlockStream
from app.api.generation.loop import ChoiceResult
from app.api.http import sse
from app.api.http.errors import APIError
from app.api.http.sealing import Sealer
from app.api.prompting.context_edits import Applied
from app.api.requests.chat import ClearThinking
from app.chat_formats.answer import AnswerReader
from app.engine.types import Chunk

PING = sse.named_event("ping", {"type": "ping"})  # Anthropic's keep-alive


def stop_reason(result: ChoiceResult, called: bool, window_bound: bool = False) -> str:
    """Anthropic's stop reason; `window_bound`: max_tokens was cut to the room left in the context,
    so an answer that used it all stopped at the context's end (model_context_window_exceeded)."""
    if called:
        return "tool_use" if result.finish_reason != "length" else "max_tokens"
    if result.finish_reason == "length":
        return "model_context_window_exceeded" if window_bound else "max_tokens"
    return "stop_sequence" if result.stop_sequence else "end_turn"


@dataclass(frozen=True)
class Shape:
    """How this request wants its Message: reasoning shown or only sealed, max_tokens cut to the
    context, the context edits made (None: it asked for none), prompt progress on pings."""

    sealer: Sealer | None = None
    shown: bool = True
    window_bound: bool = False
    edits: list[Applied] | None = None
    progress: bool = False


class MessagesPresenter:
    """One Message: the same id and blocks in the stream and in the whole answer."""

    def __init__(
        self,
        model: str,
        prompt_tokens: int,
        reader: AnswerReader,
        marked: int = 0,
        shape: Shape | None = None,
    ):
        self.id = f"msg_{uuid.uuid4().hex}"
        self.model, self.prompt_tokens = model, prompt_tokens
        self.reader = reader
        self.marked = marked  # prompt tokens up to the last cache_control breakpoint
        self.shape = shape or Shape()

    def _usage(self, output_tokens: int, cached: int) -> dict[str, int]:
        # Anthropic counts cache reads, and writes at a cache_control breakpoint, apart from
        # input_tokens: the marked prefix evaluated now is written (every prefix is cached here).
        written = max(0, self.marked - cached)
        return {
            "input_tokens": self.prompt_tokens - cached - written,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": cached,
        }

    def _message(
        self, content: list[dict[str, Any]], reason: str | None, sequence: str | None, cached: int = 0
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "content": content,
            "model": self.model,
            "stop_reason": reason,
            "stop_sequence": sequence,
            "usage": self._usage(0, cached),
        }
        if self.shape.edits is not None:
            message["context_management"] = {"applied_edits": [_applied(edit) for edit in self.shape.edits]}
        return message

    def _thinking(self, text: str) -> dict[str, Any]:
        """A thinking block: its text unless omitted, and its signature (the text, sealed for the
        next turn) in every case."""
        signature = self.shape.sealer.seal(text) if self.shape.sealer is not None else ""
        return {"type": "thinking", "thinking": text if self.shape.shown else "", "signature": signature}

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The whole Message: thinking, then text, then tool_use blocks, as the model wrote them."""
        (result,) = results
        parsed = self.reader.read(result.text, partial=False)
        content: list[dict[str, Any]] = []
        if parsed.reasoning:
            content.append(self._thinking(parsed.reasoning))
        if parsed.content:
            content.append({"type": "text", "text": parsed.content})
        content += [tool_use_block(self.reader.new_id(), call.name, call.arguments) for call in parsed.calls]
        sequence = None if parsed.calls else result.stop_sequence
        reason = stop_reason(result, bool(parsed.calls), self.shape.window_bound)
        message = self._message(content, reason, sequence)
        message["usage"] = self._usage(result.completion_tokens, result.cached_tokens)
        return message

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """message_start, content blocks as they form, message_delta with the stop reason, message_stop.

        message_start waits for the engine's first word (the prompt's start, with what the cache
        held: its usage is Anthropic's, cache reads apart); until then keep-alives are SSE
        comments, so that a request handed to an idle peer meanwhile starts only once."""
        result = ChoiceResult(0)
        blocks = BlockStream(self.reader)
        started = False
        for chunk in chunks:
            if chunk is None:
                yield PING if started else sse.KEEPALIVE
                continue
            if not started:
                cached = chunk.progress.cache if chunk.progress is not None else 0
                yield self._start(cached)
                started = True
            if chunk.progress is not None:
                if self.shape.progress:  # on the event every SDK skips
                    yield sse.named_event("ping", {"type": "ping", "prompt_progress": asdict(chunk.progress)})
                continue
            result.add(chunk)
            for event in blocks.feed(chunk.text, chunk.finish_reason is not None):
                yield from self._block_events(event)
        if not started:
            yield self._start(0)
        called = bool(blocks.deltas.last.calls)
        delta = {
            "stop_reason": stop_reason(result, called, self.shape.window_bound),
            "stop_sequence": None if called else result.stop_sequence,
        }
        usage = self._usage(result.completion_tokens, result.cached_tokens)
        yield sse.named_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        yield sse.named_event("message_stop", {"type": "message_stop"})

    def _start(self, cached: int) -> bytes:
        message = self._message([], None, None, cached)
        return sse.named_event("message_start", {"type": "message_start", "message": message})

    def _block_events(self, event: BlockEvent) -> Iterator[bytes]:
        """A block's events; a thinking block's text only if shown, and its signature before it stops."""
        if event.block.kind == "reasoning":
            if event.kind == "delta" and not self.shape.shown:
                return
            if event.kind == "stop" and self.shape.sealer is not None:
                signature = self.shape.sealer.seal(event.block.text)
                delta = {"type": "signature_delta", "signature": signature}
                yield sse.named_event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": event.block.position, "delta": delta},
                )
        yield block_event(event)

    def failure(self, error: APIError) -> bytes:
        """After the 200: an `error` event, as Anthropic sends one."""
        return sse.named_event("error", errors.body(error))


def _applied(edit: Applied) -> dict[str, Any]:
    """One of `context_management.applied_edits`, as Anthropic reports it."""
    if isinstance(edit.edit, ClearThinking):
        return {"type": conversion.CLEAR_THINKING, "cleared_thinking_turns": edit.cleared,
                "cleared_input_tokens": edit.tokens}  # fmt: skip
    return {"type": conversion.CLEAR_TOOL_USES, "cleared_tool_uses": edit.cleared,
            "cleared_input_tokens": edit.tokens}  # fmt: skip


def tool_use_block(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": "toolu_" + call_id.removeprefix("call_"),
        "name": name,
        "input": conversion.tool_input(arguments),
    }


def block_event(event: BlockEvent, offset: int = 0) -> bytes:
    """A block event as Anthropic's content_block_start / _delta / _stop (`offset`: blocks before this
    generation's, in a Message the server's MCP calls made of several)."""
    block, index = event.block, offset + event.block.position
    if event.kind == "start":
        return sse.named_event(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": _empty(block)},
        )
    if event.kind == "stop":
        return sse.named_event("content_block_stop", {"type": "content_block_stop", "index": index})
    kinds = {"content": ("text_delta", "text"), "reasoning": ("thinking_delta", "thinking")}
    kind, key = kinds.get(block.kind, ("input_json_delta", "partial_json"))
    return sse.named_event(
        "content_block_delta",
        {"type": "content_block_delta", "index": index, "delta": {"type": kind, key: event.piece}},
    )


def _empty(block: Block) -> dict[str, Any]:
    if block.kind == "content":
        return {"type": "text", "text": ""}
    if block.kind == "reasoning":
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {**tool_use_block(block.call_id, block.name, "{}"), "input": {}}
