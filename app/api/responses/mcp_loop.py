"""The Responses API's `mcp` tools: the server lists each MCP server's tools, offers them to the model
beside the client's functions, runs the calls the model makes, and generates again with their results.

The loop ends when the model answers without calling an MCP tool (text, or the client's own
functions), when a call needs the client's approval (an `mcp_approval_request` item; the next
request answers it with an `mcp_approval_response`), or after LLM_MCP_MAX_CALLS calls (or the
request's fewer `max_tool_calls`), the model then answering without tools. A tool listing
already in the conversation (an `mcp_list_tools` item) is not asked for again, as OpenAI's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from flask import Response, jsonify

from app.api.generation.loop import HungUp, collect
from app.api.http import destinations
from app.api.http.errors import InvalidRequestError
from app.api.prompting import overflow, tools
from app.api.responses import conversion, history, objects, steps
from app.api.responses.objects import ResponseHeader
from app.api.responses.presenter import ResponsesPresenter
from app.engine.engine import Engine
from app.mcp import client
from app.mcp.client import Limits, McpError, McpServer
from app.settings.current import current_config


@dataclass(frozen=True)
class McpTool:
    """A request's mcp tool: the server, which of its tools the model may call, which need approval."""

    server: McpServer
    allowed: frozenset[str] | None
    approval: str | dict[str, Any]

    def needs_approval(self, name: str) -> bool:
        return needs_approval(self.approval, name)


def needs_approval(policy: str | dict[str, Any], name: str) -> bool:
    """OpenAI's rule: every call needs approval unless "never", or the tool is named under "never"."""
    if isinstance(policy, str):
        return policy != "never"
    never = set((policy.get("never") or {}).get("tool_names") or [])
    return name not in never


def mcp_tools(body: dict[str, Any]) -> dict[str, McpTool]:
    """The request's mcp tools by label, each URL cleared against LLM_MCP_ALLOW (a 400 otherwise)."""
    allowlist = current_config().mcp_allow
    found = {}
    for index, tool in enumerate(body.get("tools") or []):
        if tool["type"] != "mcp":
            continue
        param = f"tools[{index}].server_url"
        if not allowlist:
            raise InvalidRequestError(
                "this server calls no MCP servers a request names (LLM_MCP_ALLOW is empty)", param=param
            )
        try:
            target = destinations.cleared(
                tool["server_url"], allowlist, "LLM_MCP_ALLOW", "calls MCP servers on"
            )
        except destinations.RefusedError as refused:
            raise InvalidRequestError(str(refused), param=param) from None
        server = McpServer(
            tool["server_label"], tool["server_url"], target.host, target.address, target.port,
            dict(tool.get("headers") or {}),
        )  # fmt: skip
        allowed = tool.get("allowed_tools")
        found[tool["server_label"]] = McpTool(
            server, None if allowed is None else frozenset(allowed), tool.get("require_approval") or "always"
        )
    return found


def respond(
    engine: Engine, body: dict[str, Any], before: list[dict[str, Any]], new_input: list[dict[str, Any]]
) -> Response:
    """Answer a request with mcp tools, the whole loop run here; a JSON Response object."""
    if body.get("stream") or body.get("background"):
        raise InvalidRequestError(
            "mcp tools are answered whole for now: send stream and background false", param="tools"
        )
    servers = mcp_tools(body)
    config = current_config()
    limits = Limits(config.mcp_timeout, config.mcp_max_output_bytes)
    calls_left = min(config.mcp_max_calls, body.get("max_tool_calls") or config.mcp_max_calls)
    keeper = history.Keeper(body, new_input)
    header = ResponseHeader(body, config.model_id, keeper.responses is not None, keeper.conversation)
    run = _Run(engine, body, servers, limits, before + new_input)
    run.list_tools(before + new_input)
    calls_left -= run.approved(new_input, calls_left)
    try:
        response = run.steps(header, calls_left)
    except HungUp:
        return Response(status=499)
    if keeper:
        keeper(response)
    return jsonify(response)


class _Run:
    """One response's loop: the items so far (the model's view), the output, the usage summed."""

    def __init__(
        self,
        engine: Engine,
        body: dict[str, Any],
        servers: dict[str, McpTool],
        limits: Limits,
        items: list[dict[str, Any]],
    ) -> None:
        self.engine, self.body, self.servers, self.limits = engine, body, servers, limits
        self.items = list(items)
        self.output: list[dict[str, Any]] = []
        self.listed: dict[str, list[dict[str, Any]]] = {}  # label -> its tools, as listed
        self.usage = [0, 0, 0]  # input, output, cached tokens over every step

    def list_tools(self, seen: list[dict[str, Any]]) -> None:
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
            try:
                listed = client.list_tools(tool.server, self.limits)
                found = [_listed(t) for t in listed if tool.allowed is None or t.name in tool.allowed]
                error = None
            except McpError as failed:
                found, error = [], str(failed)
            self.listed[label] = found
            self.output.append(objects.mcp_list_tools_item(label, found, error))

    def approved(self, new_input: list[dict[str, Any]], calls_left: int) -> int:
        """Run the calls the client approved in this request's input; how many were made."""
        requests = {i["id"]: i for i in self.items if i["type"] == "mcp_approval_request"}
        made = 0
        for answer in new_input:
            if answer["type"] != "mcp_approval_response":
                continue
            asked = requests.get(answer["approval_request_id"])
            if asked is None:
                raise InvalidRequestError(
                    f"no mcp_approval_request with id {answer['approval_request_id']!r} in the conversation",
                    param="input",
                )
            if answer["approve"] and made < calls_left:
                self._call(asked["server_label"], asked["name"], asked["arguments"])
                made += 1
            else:
                declined = objects.mcp_call_item(
                    asked["server_label"],
                    asked["name"],
                    asked["arguments"],
                    None,
                    "the call was not approved",
                )
                self.items.append(declined)  # the model hears of it; the client knows already
        return made

    def steps(self, header: ResponseHeader, calls_left: int) -> dict[str, Any]:
        """Generate, run the MCP calls the answer makes, generate again; the finished Response."""
        first = True
        while True:
            step_body = self._step_body(first, calls_left > 0)
            planned = steps.plan(self.engine, step_body)
            (result,) = collect(self.engine, planned.requests)
            self._count(planned.prompt_tokens, result.completion_tokens, result.cached_tokens)
            reader = planned.fitted.prompt.reader
            parsed = reader.read(result.text, partial=False)
            calls = tools.openai_calls(parsed, reader)
            ours = [c for c in calls if self._server_of(c["function"]["name"]) is not None]
            if not ours or calls_left <= 0:
                presenter = ResponsesPresenter(header, planned.prompt_tokens, reader)
                final = presenter.build([result])["output"]
                mine = {c["function"]["name"] for c in ours}
                self.output += [i for i in final if not (i["type"] == "function_call" and i["name"] in mine)]
                status = "incomplete" if result.finish_reason == "length" else "completed"
                return header.render(status, self.output, self._usage())
            for call in ours[:calls_left]:
                name, arguments = call["function"]["name"], call["function"]["arguments"]
                label = self._server_of(name)
                assert label is not None
                if self.servers[label].needs_approval(name):
                    self.output.append(objects.mcp_approval_request_item(label, name, arguments))
                    continue
                self._call(label, name, arguments)
                calls_left -= 1
            if any(i["type"] == "mcp_approval_request" for i in self.output):
                return header.render("completed", self.output, self._usage())
            first = False

    def _step_body(self, first: bool, may_call: bool) -> dict[str, Any]:
        functions = [t for t in self.body.get("tools") or [] if t["type"] == "function"]
        offered = [
            {
                "type": "function",
                "name": t["name"],
                "description": t.get("description"),
                "parameters": t["input_schema"],
            }
            for label, listed in self.listed.items()
            for t in listed
            if self._offered(label, t["name"])
        ]
        choice = self.body.get("tool_choice") if first else "auto"
        if isinstance(choice, dict) and "server_label" in choice:
            choice = {"name": choice["name"]} if choice.get("name") else "required"
        if not may_call:
            choice = "none"
        body = {**self.body, "input": self.items, "tools": functions + offered, "tool_choice": choice}
        if self.body.get("max_output_tokens"):  # OpenAI's bound is the whole response's, every step's tokens
            body["max_output_tokens"] = max(1, self.body["max_output_tokens"] - self.usage[1])
        body["truncation"] = (
            "auto" if overflow.truncates(conversion.as_chat(body), current_config()) else "disabled"
        )
        return body

    def _offered(self, label: str, name: str) -> bool:
        allowed = self.servers[label].allowed
        return allowed is None or name in allowed

    def _server_of(self, name: str) -> str | None:
        """The label of the server whose listed (and allowed) tool `name` is; the first that has it."""
        for label, listed in self.listed.items():
            if any(t["name"] == name for t in listed) and self._offered(label, name):
                return label
        return None

    def _call(self, label: str, name: str, arguments: str) -> None:
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as bad:  # e.g. cut short by max_output_tokens
            parsed = f"the model's arguments are not JSON ({bad}); the call was not made"
        try:
            if not isinstance(parsed, dict):
                raise McpError(
                    parsed if isinstance(parsed, str) else "the model's arguments are not a JSON object"
                )
            output, error = client.call_tool(self.servers[label].server, name, parsed, self.limits), None
        except McpError as failed:
            output, error = None, str(failed)
        item = objects.mcp_call_item(label, name, arguments, output, error)
        self.output.append(item)
        self.items.append(item)

    def _usage(self) -> dict[str, Any]:
        return objects.usage(self.usage[0], self.usage[1], self.usage[2])

    def _count(self, prompt: int, completion: int, cached: int) -> None:
        self.usage = [self.usage[0] + prompt, self.usage[1] + completion, self.usage[2] + cached]


def _listed(tool: client.Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": tool.annotations,
    }
