"""The Responses API's `mcp` tools: the server lists each MCP server's tools, offers them to the model
beside the client's functions, runs the calls the model makes, and generates again with their results.

One loop makes the Response's events (OpenAI's: `response.mcp_list_tools.*`, `mcp_call` items
with `response.mcp_call_arguments.delta/done` and `response.mcp_call.in_progress/completed/
failed`); a whole answer runs the same loop and returns the final object. The loop ends when
the model answers without calling an MCP tool (text, or the client's own functions), when a
call needs the client's approval (an `mcp_approval_request` item; the next request answers it
with an `mcp_approval_response`), or after LLM_MCP_MAX_CALLS calls (or the request's fewer
`max_tool_calls`), the model then answering without tools. A tool listing already in the
conversation (an `mcp_list_tools` item) is not asked for again, as OpenAI's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from flask import Response, g, jsonify, request, stream_with_context

from app.api.generation import mcp_calls
from app.api.generation.answer_blocks import BlockEvent
from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import HungUp, chunks
from app.api.generation.mcp_calls import McpTool, listed_tool
from app.api.generation.planning import PlanInputs
from app.api.http import sse
from app.api.prompting import overflow
from app.api.responses import background, conversion, history, mcp_tools, objects
from app.api.responses.mcp_presenter import LoopPresenter, guarded
from app.api.responses.objects import ResponseHeader
from app.api.responses.request import Item, ResponseRequest
from app.engine.engine import Engine
from app.engine.generation import Generation
from app.engine.types import Chunk
from app.mcp.servers import Limits, McpError
from app.serving import disconnect
from app.telemetry.request_stats import RequestStats


def respond(engine: Engine, asked: ResponseRequest, before: Sequence[Item], inputs: PlanInputs) -> Response:
    """Answer a request with mcp tools, the whole loop run here: its events, or the final object."""
    servers = mcp_tools.requested(asked.tools)
    config = inputs.config
    calls = min(config.mcp_max_calls, asked.max_tool_calls or config.mcp_max_calls)
    recorder = history.Recorder(asked)
    header = ResponseHeader(asked, config.model_id, recorder.responses is not None, recorder.conversation)
    presenter = LoopPresenter(header, recorder or None)
    run = _Run(
        engine, asked, servers, Limits(config.mcp_timeout, config.mcp_max_output_bytes), presenter, inputs
    )
    items, new_input = [*before, *asked.input], list(asked.input)
    if asked.background:  # the same loop, apart, its events kept for pollers and readers
        return background.start_loop(
            asked.stream, presenter, recorder,
            lambda cancelled, stats: run.events(items, new_input, calls, None, stats, cancelled),
        )  # fmt: skip
    events = run.events(items, new_input, calls, request.environ, g.stats)
    if asked.stream:
        # Each step plans and submits inside the stream: it needs the request's context there.
        return sse.stream_response(stream_with_context(guarded(events, presenter)))
    try:
        for _ in events:  # the same loop; its events unread
            pass
    except HungUp:
        return Response(status=499)
    assert presenter.final is not None
    return jsonify(presenter.final)


def _watched(
    chunks: Iterator[Chunk | None], generation: Generation, cancelled: Callable[[], bool]
) -> Iterator[Chunk | None]:
    for chunk in chunks:
        if cancelled():
            generation.cancel()
        yield chunk


class _Run:
    """One response's loop: the items the model sees, the calls it makes in this step."""

    def __init__(
        self,
        engine: Engine,
        asked: ResponseRequest,
        servers: dict[str, McpTool],
        limits: Limits,
        presenter: LoopPresenter,
        inputs: PlanInputs,
    ) -> None:
        self.engine, self.asked, self.servers, self.limits = engine, asked, servers, limits
        self.presenter, self.inputs = presenter, inputs
        self.items: list[Item] = []
        self.listed: dict[str, list[dict[str, Any]]] = {}  # label -> its tools, as listed
        self.pending: list[tuple[str, int, str, str, str]] = []  # this step's calls to make
        self.approvals = 0  # this step's approval requests
        self.calls_left = 0
        presenter.call_events = self._call_block

    def events(
        self,
        items: list[Item],
        new_input: list[Item],
        calls: int,
        environ: dict[str, Any] | None,
        stats: RequestStats,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Iterator[bytes]:
        """Every event of the Response, from created to completed. `environ`: the client's connection,
        whose hang-up cancels (None in the background, where `cancelled()` says)."""
        self.items, self.calls_left = list(items), calls
        yield from self.presenter.opening()
        yield from self._listings(items)
        yield from self._approved(new_input)
        first = True
        while True:
            step = conversion.as_chat(self._step(first))
            planned = plan_chat(self.engine.tokenizer, step, self.inputs, prompt_param="input")
            self.presenter.reader = planned.prompt.reader
            self.pending, self.approvals = [], 0
            if cancelled():
                raise HungUp
            generation = self.engine.submit(planned.plans)
            stats.next_step(planned.prompt_tokens)
            if environ is not None:
                generation.on_close(disconnect.watch(environ, generation.cancel))
            watched = _watched(chunks(generation, stats), generation, cancelled)
            result = yield from self.presenter.step(watched)
            if generation.cancelled:
                raise HungUp
            usage = self.presenter.usage
            usage[0], usage[1] = usage[0] + planned.prompt_tokens, usage[1] + result.completion_tokens
            usage[2] += result.cached_tokens
            for item_id, index, label, name, arguments in self.pending:
                yield from self._call(item_id, index, label, name, arguments)
            if not self.pending or self.approvals:
                break
            first = False
        yield self.presenter.closing(result)

    def _listings(self, seen: list[Item]) -> Iterator[bytes]:
        """Each server's tools: from an mcp_list_tools item of the conversation, else asked now."""
        for item in seen:
            if (
                item["type"] == "mcp_list_tools"
                and item["server_label"] in self.servers
                and not item["error"]
            ):
                self.listed[item["server_label"]] = list(item["tools"] or [])
        for label, tool in self.servers.items():
            if label in self.listed:
                continue
            item_id, index, event = (
                objects.new_id("mcpl"),
                len(self.presenter.output),
                self.presenter.item_event,
            )
            where = {"item_id": item_id, "output_index": index}
            yield event("response.output_item.added", output_index=index,
                        item=objects.mcp_list_tools_item(label, [], None, item_id))  # fmt: skip
            yield event("response.mcp_list_tools.in_progress", **where)
            try:
                listed = mcp_calls.listing(tool.server, self.limits)
                found = [t for t in map(listed_tool, listed) if tool.allows(t)]
                error = None
            except McpError as failed:
                found, error = [], str(failed)
            self.listed[label] = found
            item = objects.mcp_list_tools_item(label, found, error, item_id)
            yield event(
                "response.mcp_list_tools.failed" if error else "response.mcp_list_tools.completed", **where
            )
            yield event("response.output_item.done", output_index=index, item=item)
            self.presenter.output.append(item)

    def _approved(self, new_input: list[Item]) -> Iterator[bytes]:
        """Make the calls the client approved in this request's input; tell the model of the others."""
        for asked, approve in mcp_tools.answered(self.items, new_input, self.servers):
            label, name, arguments = asked["server_label"], asked["name"], asked["arguments"]
            if approve and self.calls_left > 0:
                item_id, index = objects.new_id("mcp"), len(self.presenter.output)
                yield self.presenter.item_event(
                    "response.output_item.added", output_index=index,
                    item=objects.mcp_call_item(label, name, arguments, None, None, item_id, "in_progress"),
                )  # fmt: skip
                yield from self._call(item_id, index, label, name, arguments, asked["id"])
            else:  # the model hears of it; the client knows already
                self.items.append(
                    objects.mcp_call_item(label, name, arguments, None, "the call was not approved")
                )

    def _call_block(self, event: BlockEvent, item_id: str, index: int) -> Iterator[bytes] | None:
        """A call block's events if it calls an MCP tool (None: the client's function, as usual)."""
        block = event.block
        hit = mcp_calls.found(block.name, self.servers, self.listed)
        if hit is None:
            return None
        label, tool = hit
        if self.calls_left - len(self.pending) <= 0:
            return iter(())  # past the most calls: not made, not shown
        approval = self.servers[label].needs_approval(tool)
        item_id = ("mcpr_" if approval else "mcp_") + item_id.partition("_")[
            2
        ]  # the block's own id, as an mcp item's
        emit, where = self.presenter.item_event, {"item_id": item_id, "output_index": index}
        if approval:
            if event.kind != "stop":
                return iter(())
            self.approvals += 1
            item = objects.mcp_approval_request_item(label, block.name, block.text, item_id)
            self.presenter.output.append(item)
            added = emit("response.output_item.added", output_index=index, item=item)
            return iter((added, emit("response.output_item.done", output_index=index, item=item)))
        if event.kind == "start":
            item = objects.mcp_call_item(label, block.name, "", None, None, item_id, "in_progress")
            return iter((emit("response.output_item.added", output_index=index, item=item),))
        if event.kind == "delta":
            return iter((emit("response.mcp_call_arguments.delta", **where, delta=event.piece),))
        self.pending.append((item_id, index, label, block.name, block.text))
        return iter((emit("response.mcp_call_arguments.done", **where, arguments=block.text),))

    def _call(
        self, item_id: str, index: int, label: str, name: str, arguments: str, approval: str | None = None
    ) -> Iterator[bytes]:
        """Make one call (`approval`: the id of the request the client approved it by): in_progress,
        then completed or failed, and the finished item."""
        emit, where = self.presenter.item_event, {"item_id": item_id, "output_index": index}
        yield emit("response.mcp_call.in_progress", **where)
        output, error = yield from mcp_calls.made_beating(
            self.servers[label], name, arguments, self.limits, sse.KEEPALIVE
        )
        item = objects.mcp_call_item(label, name, arguments, output, error, item_id, approval=approval)
        yield emit("response.mcp_call.failed" if error else "response.mcp_call.completed", **where)
        yield emit("response.output_item.done", output_index=index, item=item)
        self.presenter.output.append(item)
        self.items.append(item)
        self.calls_left -= 1

    def _step(self, first: bool) -> ResponseRequest:
        """The request one step of the loop answers: the items so far, the MCP tools as listed."""
        functions = [t for t in self.asked.tools if t["type"] == "function"]
        offered = mcp_calls.offered(self.servers, self.listed)
        choice = mcp_tools.as_chat_choice(self.asked.tool_choice) if first else "auto"
        if self.calls_left <= 0:
            choice = "none"
        most = self.asked.max_output_tokens  # OpenAI's bound is the whole response's, every step's tokens
        step = replace(
            self.asked,
            input=tuple(self.items),
            tools=(*functions, *offered),
            tool_choice=choice,
            max_output_tokens=max(1, most - self.presenter.usage[1]) if most else most,
        )
        truncates = overflow.truncates(conversion.as_chat(step), self.inputs.config)
        return replace(step, truncation="auto" if truncates else "disabled")
