"""Anthropic's answer: the Message object, or message_start … message_stop with content block events."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

from app.api.anthropic import conversion, errors
from app.api.generation.answer_blocks import Block, BlockEvent, BlockStream
from app.api.generation.loop import ChoiceResult
from app.api.http import sse
from app.api.http.errors import APIError
from app.chat_formats.answer import AnswerReader
from app.engine.types import Chunk

PING = sse.named_event("ping", {"type": "ping"})  # Anthropic's keep-alive


def stop_reason(result: ChoiceResult, called: bool) -> str:
    if called:
        return "tool_use" if result.finish_reason != "length" else "max_tokens"
    if result.finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if result.stop_sequence else "end_turn"


class MessagesPresenter:
    """One Message: the same id and blocks in the stream and in the whole answer."""

    def __init__(self, model: str, prompt_tokens: int, reader: AnswerReader, marked: int = 0):
        self.id = f"msg_{uuid.uuid4().hex}"
        self.model, self.prompt_tokens = model, prompt_tokens
        self.reader = reader
        self.marked = marked  # prompt tokens up to the last cache_control breakpoint

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
        self, content: list[dict[str, Any]], reason: str | None, sequence: str | None
    ) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "content": content,
            "model": self.model,
            "stop_reason": reason,
            "stop_sequence": sequence,
            "usage": self._usage(0, 0),
        }

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The whole Message: thinking, then text, then tool_use blocks, as the model wrote them."""
        (result,) = results
        parsed = self.reader.read(result.text, partial=False)
        content: list[dict[str, Any]] = []
        if parsed.reasoning:
            content.append({"type": "thinking", "thinking": parsed.reasoning, "signature": ""})
        if parsed.content:
            content.append({"type": "text", "text": parsed.content})
        content += [tool_use_block(self.reader.new_id(), call.name, call.arguments) for call in parsed.calls]
        sequence = None if parsed.calls else result.stop_sequence
        message = self._message(content, stop_reason(result, bool(parsed.calls)), sequence)
        message["usage"] = self._usage(result.completion_tokens, result.cached_tokens)
        return message

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """message_start, content blocks as they form, message_delta with the stop reason, message_stop."""
        yield sse.named_event(
            "message_start", {"type": "message_start", "message": self._message([], None, None)}
        )
        result = ChoiceResult(0)
        blocks = BlockStream(self.reader)
        for chunk in chunks:
            if chunk is None:
                yield PING
                continue
            if chunk.progress is not None:  # on the event every SDK skips
                yield sse.named_event("ping", {"type": "ping", "prompt_progress": asdict(chunk.progress)})
                continue
            result.add(chunk)
            for event in blocks.feed(chunk.text, chunk.finish_reason is not None):
                yield block_event(event)
        called = bool(blocks.deltas.last.calls)
        delta = {
            "stop_reason": stop_reason(result, called),
            "stop_sequence": None if called else result.stop_sequence,
        }
        usage = self._usage(result.completion_tokens, result.cached_tokens)
        yield sse.named_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        yield sse.named_event("message_stop", {"type": "message_stop"})

    def failure(self, error: APIError) -> bytes:
        """After the 200: an `error` event, as Anthropic sends one."""
        return sse.named_event("error", errors.body(error))


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
