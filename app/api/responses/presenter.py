"""The Responses API's answer: the Response object, or its typed event stream, numbered from 0."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import asdict
from typing import Any

from app.api.generation import logprobs
from app.api.generation.answer_blocks import Block, BlockEvent, BlockStream
from app.api.generation.loop import ChoiceResult
from app.api.http import sse
from app.api.http.errors import APIError
from app.api.prompting import tools
from app.api.responses import objects
from app.api.responses.objects import ResponseHeader
from app.api.responses.tool_kinds import Declared, ToolKinds, partial_input
from app.chat_formats.answer import AnswerReader
from app.engine.types import Chunk, TokenLogprob

# The error codes the Response object allows, for what can go wrong after the 200.
_FAILURE_CODES = {429: "rate_limit_exceeded"}


def _status(result: ChoiceResult) -> str:
    return "incomplete" if result.finish_reason == "length" else "completed"


class ResponsesPresenter:
    """One Response: the same ids in the stream and in the final object."""

    def __init__(
        self,
        header: ResponseHeader,
        prompt_tokens: int,
        reader: AnswerReader,
        on_final: Callable[[dict[str, Any]], None] | None = None,
        on_event: Callable[[dict[str, Any]], None] | None = None,
        wants_logprobs: bool = False,
        kinds: ToolKinds | None = None,
        sealed: Callable[[str], str] | None = None,
    ):
        self.header, self.prompt_tokens = header, prompt_tokens
        self.on_final = (
            on_final  # given the finished Response (completed, incomplete or failed), e.g. to store it
        )
        self.on_event = on_event  # given each event's data as it is made (a background run keeps them)
        self.reader = reader
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        # `include: ["message.output_text.logprobs"]`: the tokens' log-probabilities, each on the
        # text delta that first carries text after it, and all of them on the finished text.
        self.wants_logprobs = wants_logprobs
        self._pending: list[TokenLogprob] = []
        self._given: list[dict[str, Any]] = []
        self.offset = 0  # output items before this generation's (a server-side tool loop's earlier steps)
        self.empty_message = True  # a generation that wrote nothing is one empty message
        # The events of a call block, when something other than the client runs it (mcp_loop).
        self.call_events: Callable[[BlockEvent, str, int], Iterator[bytes] | None] | None = None
        self.kinds = kinds  # the request's tools by the names the model calls them (tool_kinds.py)
        self.sealed = sealed  # with include reasoning.encrypted_content: how reasoning is sealed
        self._inputs: dict[int, str] = {}  # a streaming custom call's input so far, by block

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        """The whole Response: a reasoning item, a message, function calls, as the model wrote them."""
        (result,) = results
        parsed = self.reader.read(result.text, partial=False)
        status = _status(result)
        items = []
        if parsed.reasoning:
            items.append(objects.reasoning_item(objects.new_id("rs"), parsed.reasoning, status, self.sealed))
        if parsed.content or not parsed.calls:
            shaped = logprobs.chat(result.logprobs)["content"] if self.wants_logprobs else None
            items.append(objects.message_item(objects.new_id("msg"), parsed.content, status, shaped))
        for call in tools.openai_calls(parsed, self.reader):
            items.append(
                objects.call_item(
                    objects.new_id("fc"), call, status, self._declared(call["function"]["name"])
                )
            )
        return self._final(items, result)

    def _final(self, output: list[dict[str, Any]], result: ChoiceResult) -> dict[str, Any]:
        tokens = objects.usage(self.prompt_tokens, result.completion_tokens, result.cached_tokens)
        return self._finished(self.header.render(_status(result), output, tokens))

    def _finished(self, response: dict[str, Any]) -> dict[str, Any]:
        if self.on_final is not None:
            self.on_final(response)
        return response

    def events(self, chunks: Iterator[Chunk | None]) -> Iterator[bytes]:
        """created, in_progress, then the output items as they form, then completed or incomplete."""
        yield from self.opening()
        result = yield from self.step(chunks)
        yield self.closing(result)

    def opening(self) -> Iterator[bytes]:
        yield self._event("response.created", response=self.header.render("in_progress"))
        yield self._event("response.in_progress", response=self.header.render("in_progress"))

    def closing(self, result: ChoiceResult) -> bytes:
        name = "response.incomplete" if result.finish_reason == "length" else "response.completed"
        return self._event(name, response=self._final(self.output, result))

    def step(self, chunks: Iterator[Chunk | None]) -> Generator[bytes, None, ChoiceResult]:
        """One generation's output items as they form (after those already in the output); its result."""
        result = ChoiceResult(0)
        blocks = BlockStream(self.reader)
        ids: dict[int, str] = {}
        self.offset = len(self.output)
        for chunk in chunks:
            if chunk is None:
                yield sse.KEEPALIVE
                continue
            if chunk.progress is not None:  # the event the SDKs take again: still in progress
                progress = asdict(chunk.progress)
                yield self._event("response.in_progress", response=self.header.render("in_progress"),
                                  prompt_progress=progress)  # fmt: skip
                continue
            result.add(chunk)
            if self.wants_logprobs:
                self._pending.extend(chunk.logprobs)
            for event in blocks.feed(chunk.text, chunk.finish_reason is not None):
                item_id = ids.setdefault(event.block.position, objects.new_id(_PREFIXES[event.block.kind]))
                yield from self._item_events(event, item_id, result)
        if not blocks.blocks and self.empty_message:  # nothing at all was written: still one (empty) message
            item_id = objects.new_id("msg")
            empty = Block("content", 0)
            for kind in ("start", "stop"):
                yield from self._item_events(BlockEvent(kind, empty), item_id, result)
        return result

    def _item_events(self, event: BlockEvent, item_id: str, result: ChoiceResult) -> Iterator[bytes]:
        block, index = event.block, self.offset + event.block.position
        where = {"item_id": item_id, "output_index": index}
        if block.kind == "call" and self.call_events is not None:  # a call the server may make itself
            own = self.call_events(event, item_id, index)
            if own is not None:
                yield from own
                return
        custom = block.kind == "call" and self._declared(block.name).kind == "custom"
        if event.kind == "start":
            yield self._event(
                "response.output_item.added", output_index=index, item=self._item(block, item_id, None)
            )
            if block.kind == "content":
                yield self._event(
                    "response.content_part.added", **where, content_index=0, part=objects.text_part("")
                )
        elif event.kind == "delta" and custom:  # the input as text, decoded from the arguments so far
            so_far, before = partial_input(block.text), self._inputs.get(block.position, "")
            if so_far.startswith(before) and len(so_far) > len(before):
                self._inputs[block.position] = so_far
                yield self._event(
                    "response.custom_tool_call_input.delta", **where, delta=so_far[len(before) :]
                )
        elif event.kind == "delta":
            kinds = {
                "content": "response.output_text.delta",
                "reasoning": "response.reasoning_text.delta",
                "call": "response.function_call_arguments.delta",
            }
            extra: dict[str, Any] = {"content_index": 0} if block.kind != "call" else {}
            if block.kind == "content":
                extra["logprobs"] = self._logprobs_so_far()
            yield self._event(kinds[block.kind], **where, **extra, delta=event.piece)
        else:
            if block.kind == "content":
                self._logprobs_so_far()  # the last tokens' too
            item = self._item(block, item_id, _status(result), self._given)
            self.output.append(item)
            if block.kind == "content":
                text, given = block.text, self._given
                yield self._event(
                    "response.output_text.done", **where, content_index=0, text=text, logprobs=given
                )
                part = objects.text_part(text, given)
                yield self._event("response.content_part.done", **where, content_index=0, part=part)
            elif block.kind == "reasoning":
                yield self._event("response.reasoning_text.done", **where, content_index=0, text=block.text)
            elif custom:
                yield self._event("response.custom_tool_call_input.done", **where, input=item["input"])
            else:
                name = item["name"]
                yield self._event(
                    "response.function_call_arguments.done", **where, name=name, arguments=block.text
                )
            yield self._event("response.output_item.done", output_index=index, item=item)

    def _declared(self, called: str) -> Declared:
        return self.kinds.of(called) if self.kinds is not None else Declared("function", called)

    def _item(
        self, block: Block, item_id: str, status: str | None, scored: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The output item a block makes: in progress (`status` None, empty) or finished (a message with
        its tokens' log-probabilities, if `scored`)."""
        text = None if status is None else block.text
        if block.kind == "content":
            return objects.message_item(item_id, text, status or "in_progress", scored)
        if block.kind == "reasoning":
            return objects.reasoning_item(item_id, text, status or "in_progress", self.sealed)
        call = {"id": block.call_id, "function": {"name": block.name, "arguments": text or ""}}
        return objects.call_item(item_id, call, status or "in_progress", self._declared(block.name))

    def _logprobs_so_far(self) -> list[dict[str, Any]]:
        """The log-probabilities of the tokens since the last text delta (kept for the finished text)."""
        shaped: list[dict[str, Any]] = logprobs.chat(self._pending)["content"] if self._pending else []
        self._pending = []
        self._given.extend(shaped)
        return shaped

    def failure(self, error: APIError) -> bytes:
        """After the 200: response.failed, carrying the error."""
        failed = {"code": _FAILURE_CODES.get(error.status, "server_error"), "message": error.message}
        response = self.header.render("failed", self.output, error=failed)
        try:
            self._finished(response)
        except APIError:
            pass  # the stream is ending with an error already: the client hears of that one
        return self._event("response.failed", response=response)

    def _event(self, kind: str, /, **fields: Any) -> bytes:
        payload = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        if self.on_event is not None:
            self.on_event(payload)
        return sse.named_event(kind, payload)


_PREFIXES = {"content": "msg", "reasoning": "rs", "call": "fc"}
