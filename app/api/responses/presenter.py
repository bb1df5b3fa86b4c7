"""The Responses API's answer: the Response object, or its typed event stream, numbered from 0."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from app.api.common import sse, tools
from app.api.common.errors import APIError
from app.api.common.generate import ChoiceResult
from app.api.responses import objects
from app.api.responses.objects import ResponseShape
from app.engine.types import Chunk

# The error codes the Response object allows, for what can go wrong after the 200.
_FAILURE_CODES = {429: "rate_limit_exceeded"}


class ResponsesPresenter:
    """One Response: the same ids in the stream and in the final object."""

    def __init__(
        self, shape: ResponseShape, prompt_tokens: int, call_tools: list[dict[str, Any]] | None, forced: bool
    ):
        self.shape, self.prompt_tokens = shape, prompt_tokens
        self.tools, self.forced = call_tools, forced
        self.sequence = 0
        self.output: list[dict[str, Any]] = []

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The whole Response, once the answer has finished."""
        (result,) = results
        return self._final(self._items(result), result)

    def _items(self, result: ChoiceResult) -> list[dict[str, Any]]:
        status = "incomplete" if result.finish_reason == "length" else "completed"
        calls = tools.calls_for(result, self.tools, self.forced)[0] if self.tools else None
        if calls:
            return [objects.call_item(objects.new_id("fc"), call, status) for call in calls]
        return [objects.message_item(objects.new_id("msg"), result.text, status)]

    def _final(self, output: list[dict[str, Any]], result: ChoiceResult) -> dict[str, Any]:
        status = "incomplete" if result.finish_reason == "length" else "completed"
        tokens = objects.usage(self.prompt_tokens, result.completion_tokens, result.cached_tokens)
        return self.shape.render(status, output, tokens)

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """created, in_progress, then the output items as they form, then completed or incomplete."""
        yield self._event("response.created", response=self.shape.render("in_progress"))
        yield self._event("response.in_progress", response=self.shape.render("in_progress"))
        result = ChoiceResult(0)
        message: _StreamedMessage | None = None
        for chunk in chunks:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            result.add(chunk)
            if self.tools and (self.forced or result.text.lstrip().startswith("{")) and message is None:
                continue  # may be a call: held until the answer ends
            if chunk.text:
                if message is None:
                    message = _StreamedMessage(self, len(self.output))
                    yield from message.open()
                yield message.delta(chunk.text)
        if message is None:
            yield from self._held_output(result)
        else:
            yield from message.close(result)
        name = "response.incomplete" if result.finish_reason == "length" else "response.completed"
        yield self._event(name, response=self._final(self.output, result))

    def _held_output(self, result: ChoiceResult) -> Iterator[bytes]:
        """A held answer once it has ended: function_call items if it is calls, else one message."""
        calls = tools.calls_for(result, self.tools, self.forced)[0] if self.tools else None
        if not calls:
            message = _StreamedMessage(self, len(self.output))
            yield from message.open()
            if result.text:
                yield message.delta(result.text)
            yield from message.close(result)
            return
        status = "incomplete" if result.finish_reason == "length" else "completed"
        for call in calls:
            index, item_id = len(self.output), objects.new_id("fc")
            arguments = call["function"]["arguments"]
            self.output.append(objects.call_item(item_id, call, status))
            yield self._event(
                "response.output_item.added",
                output_index=index,
                item=objects.call_item(item_id, call, "in_progress", arguments=""),
            )
            for piece in tools.argument_pieces(arguments):
                yield self._event(
                    "response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece
                )
            yield self._event(
                "response.function_call_arguments.done",
                item_id=item_id,
                output_index=index,
                name=call["function"]["name"],
                arguments=arguments,
            )
            yield self._event("response.output_item.done", output_index=index, item=self.output[index])

    def failure(self, error: APIError) -> bytes:
        """After the 200: response.failed, carrying the error."""
        failed = {"code": _FAILURE_CODES.get(error.status, "server_error"), "message": error.message}
        return self._event("response.failed", response=self.shape.render("failed", self.output, error=failed))

    def _event(self, kind: str, /, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return sse.named_event(kind, payload)


class _StreamedMessage:
    """A message item streamed as its text comes: added, part added, deltas, then the done events."""

    def __init__(self, presenter: ResponsesPresenter, index: int) -> None:
        self.presenter, self.index = presenter, index
        self.item_id = objects.new_id("msg")
        self.text = ""

    def open(self) -> Iterator[bytes]:
        event = self.presenter._event
        yield event(
            "response.output_item.added",
            output_index=self.index,
            item=objects.message_item(self.item_id, None, "in_progress"),
        )
        yield event(
            "response.content_part.added",
            item_id=self.item_id,
            output_index=self.index,
            content_index=0,
            part=objects.text_part(""),
        )

    def delta(self, text: str) -> bytes:
        self.text += text
        return self.presenter._event(
            "response.output_text.delta",
            item_id=self.item_id,
            output_index=self.index,
            content_index=0,
            delta=text,
            logprobs=[],
        )

    def close(self, result: ChoiceResult) -> Iterator[bytes]:
        event = self.presenter._event
        status = "incomplete" if result.finish_reason == "length" else "completed"
        item = objects.message_item(self.item_id, self.text, status)
        self.presenter.output.append(item)
        where = {"item_id": self.item_id, "output_index": self.index, "content_index": 0}
        yield event("response.output_text.done", **where, text=self.text, logprobs=[])
        yield event("response.content_part.done", **where, part=objects.text_part(self.text))
        yield event("response.output_item.done", output_index=self.index, item=item)
