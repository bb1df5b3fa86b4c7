"""Anthropic's answer: the Message object, or message_start … message_stop with content block events."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from app.api.anthropic import conversion, errors
from app.api.common import sse, tools
from app.api.common.errors import APIError
from app.api.common.generate import ChoiceResult
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

    def __init__(self, model: str, prompt_tokens: int, call_tools: list[dict[str, Any]] | None, forced: bool):
        self.id = f"msg_{uuid.uuid4().hex}"
        self.model, self.prompt_tokens = model, prompt_tokens
        self.tools, self.forced = call_tools, forced

    def _usage(self, output_tokens: int, cached: int) -> dict[str, int]:
        # Anthropic counts cache reads apart from input_tokens.
        return {
            "input_tokens": self.prompt_tokens - cached,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached,
        }

    def _calls(self, result: ChoiceResult) -> list[dict[str, Any]] | None:
        return tools.calls_for(result, self.tools, self.forced)[0] if self.tools else None

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
        """The whole Message."""
        (result,) = results
        calls = self._calls(result)
        if calls:
            content = [_tool_use(call) for call in calls]
        else:
            content = [{"type": "text", "text": result.text}] if result.text else []
        sequence = None if calls else result.stop_sequence
        message = self._message(content, stop_reason(result, bool(calls)), sequence)
        message["usage"] = self._usage(result.completion_tokens, result.cached_tokens)
        return message

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """message_start, content blocks as they form, message_delta with the stop reason, message_stop."""
        yield sse.named_event(
            "message_start", {"type": "message_start", "message": self._message([], None, None)}
        )
        result, opened = ChoiceResult(0), False
        for chunk in chunks:
            if chunk is None:
                yield PING
                continue
            result.add(chunk)
            if self.tools and (self.forced or result.text.lstrip().startswith("{")) and not opened:
                continue  # may be a call: held until the answer ends
            if chunk.text:
                if not opened:
                    opened = True
                    yield _block_start(0, {"type": "text", "text": ""})
                yield _delta(0, {"type": "text_delta", "text": chunk.text})
        calls = None if opened else self._calls(result)
        if calls:
            for index, call in enumerate(calls):
                yield _block_start(index, {**_tool_use(call), "input": {}})
                for piece in tools.argument_pieces(call["function"]["arguments"]):
                    yield _delta(index, {"type": "input_json_delta", "partial_json": piece})
                yield _block_stop(index)
        else:
            if not opened and result.text:
                opened = True
                yield _block_start(0, {"type": "text", "text": ""})
                yield _delta(0, {"type": "text_delta", "text": result.text})
            if opened:
                yield _block_stop(0)
        delta = {
            "stop_reason": stop_reason(result, bool(calls)),
            "stop_sequence": None if calls else result.stop_sequence,
        }
        usage = self._usage(result.completion_tokens, result.cached_tokens)
        yield sse.named_event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        yield sse.named_event("message_stop", {"type": "message_stop"})

    def failure(self, error: APIError) -> bytes:
        """After the 200: an `error` event, as Anthropic sends one."""
        return sse.named_event("error", errors.body(error))


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call["function"]
    return {
        "type": "tool_use",
        "id": "toolu_" + call["id"].removeprefix("call_"),
        "name": function["name"],
        "input": conversion.tool_input(function["arguments"]),
    }


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    return sse.named_event(
        "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
    )


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse.named_event(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def _block_stop(index: int) -> bytes:
    return sse.named_event("content_block_stop", {"type": "content_block_stop", "index": index})
