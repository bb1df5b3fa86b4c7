"""Anthropic's MCP connector: `mcp_servers` on /v1/messages. The server lists each server's tools,
offers them to the model beside the client's, makes the calls the model makes, and generates again
with their results; the Message holds `mcp_tool_use` and `mcp_tool_result` blocks where the calls
were made, whole or streamed as content blocks (an mcp_tool_use's input as input_json_delta).

Servers: a URL the operator allows (LLM_MCP_ALLOW), or one the operator configured under that name
(LLM_MCP_SERVERS) whatever URL the request gives; `authorization_token` goes as a bearer header
and nowhere else. Which tools: `tool_configuration` (mcp-client-2025-04-04), or an `mcp_toolset`
tool (mcp-client-2025-11-20). No approvals: the connector runs every call, as Anthropic's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from flask import Response, g, jsonify, request, stream_with_context

from app.api.anthropic import conversion, errors, window
from app.api.anthropic.presenter import PING, block_event, stop_reason, tool_use_block
from app.api.anthropic.request import MessagesRequest
from app.api.generation import mcp_calls
from app.api.generation.answer_blocks import BlockEvent, BlockStream
from app.api.generation.chat_job import plan_chat
from app.api.generation.loop import ChoiceResult, HungUp, chunks
from app.api.generation.mcp_calls import Listings, McpTool
from app.api.generation.planning import PlanInputs
from app.api.http import sse
from app.api.http.errors import APIError, from_engine
from app.api.requests.chat import ChatRequest
from app.engine.engine import Engine
from app.engine.errors import EngineError
from app.mcp.servers import Limits, McpError
from app.serving import disconnect
from app.settings.current import current_config
from app.telemetry.request_stats import RequestStats


def servers(asked: MessagesRequest) -> dict[str, McpTool]:
    """The request's MCP servers by name, each reachable (a 400 naming the field otherwise)."""
    found = {}
    toolsets = asked.mcp_toolsets
    for index, server in enumerate(asked.mcp_servers):
        name, token = server["name"], server.get("authorization_token")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if any(c.name == name for c in current_config().mcp_servers):
            resolved = mcp_calls.configured(name, headers, f"mcp_servers[{index}].name")
        else:
            resolved = mcp_calls.named_by_url(name, server["url"], headers, f"mcp_servers[{index}].url")
        found[name] = McpTool(resolved, _allowed(server, toolsets.get(name), bool(toolsets)))
    return found


def _allowed(
    server: Mapping[str, Any], toolset: Mapping[str, Any] | None, any_toolset: bool
) -> mcp_calls.Rule:
    """The tools on: all, those tool_configuration allows, or an mcp_toolset's (none without one when
    the request uses toolsets)."""
    configuration = server.get("tool_configuration") or {}
    if configuration.get("enabled") is False or (any_toolset and toolset is None):
        return mcp_calls.only(())
    if toolset is not None:
        configs = toolset.get("configs") or {}
        if ((toolset.get("default_config") or {}).get("enabled")) is False:
            return mcp_calls.only(n for n, c in configs.items() if c.get("enabled"))
        return mcp_calls.all_but(n for n, c in configs.items() if c.get("enabled") is False)
    allowed = configuration.get("allowed_tools")
    return mcp_calls.every_tool if allowed is None else mcp_calls.only(allowed)


def respond(engine: Engine, asked: MessagesRequest, inputs: PlanInputs) -> Response:
    """The Message for a request with mcp_servers: its events, or the whole object."""
    config, chat = inputs.config, asked.chat
    message = _Message(
        engine, chat, servers(asked), Limits(config.mcp_timeout, config.mcp_max_output_bytes), inputs
    )
    events = message.events(request.environ, g.stats, config.mcp_max_calls)
    if chat.stream:
        return sse.stream_response(stream_with_context(_guarded(events)))
    try:
        for _ in events:
            pass
    except HungUp:
        return Response(status=499)
    return jsonify(message.whole())


def _guarded(events: Iterator[bytes]) -> Iterator[bytes]:
    try:
        yield from events
    except HungUp:
        return
    except (APIError, EngineError) as exc:
        yield sse.named_event("error", errors.body(exc if isinstance(exc, APIError) else from_engine(exc)))


class _Message:
    """One Message over several generations: its blocks in order, usage summed, the last stop."""

    def __init__(
        self, engine: Engine, chat: ChatRequest, tools: dict[str, McpTool], limits: Limits, inputs: PlanInputs
    ) -> None:
        self.engine, self.chat, self.tools, self.limits, self.inputs = engine, chat, tools, limits, inputs
        self.model = inputs.config.model_id
        self.id = f"msg_{uuid.uuid4().hex}"
        self.content: list[dict[str, Any]] = []
        self.turns: list[dict[str, Any]] = []  # the calls made and their results, for the next step
        self.listed: Listings = {}
        self.usage = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0}
        self.stop: tuple[str, str | None] = ("end_turn", None)
        self.pending: list[tuple[str, str, str, str]] = []  # this step's calls: id, server, tool, arguments

    def whole(self) -> dict[str, Any]:
        reason, sequence = self.stop
        return {
            "id": self.id, "type": "message", "role": "assistant", "content": self.content,
            "model": self.model, "stop_reason": reason, "stop_sequence": sequence,
            "usage": {**self.usage, "cache_creation_input_tokens": 0},
        }  # fmt: skip

    def events(self, environ: dict[str, Any], stats: RequestStats, calls: int) -> Iterator[bytes]:
        opened = {**self.whole(), "content": [], "stop_reason": None}
        yield sse.named_event("message_start", {"type": "message_start", "message": opened})
        self._list_tools()
        first = True
        while True:
            step = self._step_chat(first, calls > 0)
            config = self.inputs.config
            job = plan_chat(self.engine.tokenizer, step, self.inputs, prompt_param="messages",
                            bound=window.bound(config))  # fmt: skip
            prompt = job.prompt
            generation = self.engine.submit(job.plans)
            stats.next_step(len(prompt.tokens))
            generation.on_close(disconnect.watch(environ, generation.cancel))
            result, blocks, offset = ChoiceResult(0), BlockStream(prompt.reader), len(self.content)
            self.pending = []
            for chunk in chunks(generation, stats):
                if chunk is None:
                    yield PING
                    continue
                if chunk.progress is not None:
                    continue
                result.add(chunk)
                for event in blocks.feed(chunk.text, chunk.finish_reason is not None):
                    yield from self._block(event, offset, calls)
            self._count(len(prompt.tokens), result)
            called = any(block["type"] == "tool_use" for block in self.content[offset:])
            self.stop = (stop_reason(result, called), None if called else result.stop_sequence)
            for call in self.pending:
                yield from self._call(*call)
                calls -= 1
            if not self.pending or called:
                break
            first = False
        delta = {"stop_reason": self.stop[0], "stop_sequence": self.stop[1]}
        yield sse.named_event("message_delta", {"type": "message_delta", "delta": delta, "usage": self.usage})
        yield sse.named_event("message_stop", {"type": "message_stop"})

    def _list_tools(self) -> None:
        for name, tool in self.tools.items():
            try:
                listed = mcp_calls.listing(tool.server, self.limits)
            except McpError:  # its tools are not offered; the model answers without them
                listed = []
            self.listed[name] = [mcp_calls.listed_tool(t) for t in listed]

    def _step_chat(self, first: bool, may_call: bool) -> ChatRequest:
        offered = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
                   for t in mcp_calls.offered(self.tools, self.listed)]  # fmt: skip
        choice = self.chat.tool_choice if first else "auto"
        if not may_call:
            choice = "none"
        budget = (
            None
            if self.chat.max_tokens is None
            else max(1, self.chat.max_tokens - self.usage["output_tokens"])
        )
        return replace(
            self.chat, messages=[*self.chat.messages, *self.turns], tools=[*self.chat.tools, *offered],
            tool_choice=choice, max_tokens=budget,
        )  # fmt: skip

    def _block(self, event: BlockEvent, offset: int, calls: int) -> Iterator[bytes]:
        block, index = event.block, offset + event.block.position
        server = mcp_calls.server_of(block.name, self.tools, self.listed) if block.kind == "call" else None
        if server is None or len(self.pending) >= calls:
            if event.kind == "stop":
                self.content.append(_finished(block))
            yield block_event(event, offset)
            return
        call_id = "mcptoolu_" + block.call_id.removeprefix("call_")
        if event.kind == "start":
            yield _start(index, {"type": "mcp_tool_use", "id": call_id, "name": block.name,
                                 "server_name": server, "input": {}})  # fmt: skip
        elif event.kind == "delta":
            delta = {"type": "input_json_delta", "partial_json": event.piece}
            yield sse.named_event(
                "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
            )
        else:
            used = {"type": "mcp_tool_use", "id": call_id, "name": block.name, "server_name": server}
            self.content.append({**used, "input": conversion.tool_input(block.text)})
            self.pending.append((call_id, server, block.name, block.text))
            yield _stop(index)

    def _call(self, call_id: str, server: str, name: str, arguments: str) -> Iterator[bytes]:
        output, error = yield from mcp_calls.made_beating(
            self.tools[server], name, arguments, self.limits, PING
        )
        text = output if error is None else error
        result = {"type": "mcp_tool_result", "tool_use_id": call_id, "is_error": error is not None,
                  "content": [{"type": "text", "text": text or ""}]}  # fmt: skip
        index = len(self.content)
        self.content.append(result)
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        self.turns += [{"role": "assistant", "content": None, "tool_calls": [call]},
                       {"role": "tool", "tool_call_id": call_id, "content": text or ""}]  # fmt: skip
        yield _start(index, result)
        yield _stop(index)

    def _count(self, prompt: int, result: ChoiceResult) -> None:
        self.usage["input_tokens"] += prompt - result.cached_tokens
        self.usage["output_tokens"] += result.completion_tokens
        self.usage["cache_read_input_tokens"] += result.cached_tokens


def _start(index: int, block: dict[str, Any]) -> bytes:
    event = {"type": "content_block_start", "index": index, "content_block": block}
    return sse.named_event("content_block_start", event)


def _stop(index: int) -> bytes:
    return sse.named_event("content_block_stop", {"type": "content_block_stop", "index": index})


def _finished(block: Any) -> dict[str, Any]:
    """A finished block as the whole Message holds it."""
    if block.kind == "content":
        return {"type": "text", "text": block.text}
    if block.kind == "reasoning":
        return {"type": "thinking", "thinking": block.text, "signature": ""}
    return tool_use_block(block.call_id, block.name, block.text)
