"""A Responses request's `mcp` tools (OpenAI's fields): which servers, which tools, which calls wait for
the client's approval."""

from __future__ import annotations

import functools
from collections.abc import Container, Iterable, Mapping, Sequence
from typing import Any

from app.api.generation import mcp_calls
from app.api.generation.mcp_calls import Listed, McpTool, Rule, configured, named_by_url
from app.api.http.errors import InvalidRequestError


def matching(given: dict[str, Any]) -> Rule:
    """OpenAI's tool filter as a rule: the tools it names (if it names any) that are read-only or
    not as it says (if it says); a filter that says neither holds for no tool."""
    names, read_only = given.get("tool_names"), given.get("read_only")
    if names is None and read_only is None:
        return mcp_calls.no_tool
    by_name = mcp_calls.every_tool if names is None else mcp_calls.only(names)
    return lambda tool: by_name(tool) and (read_only is None or mcp_calls.read_only(tool) == read_only)


def needs_approval(policy: str | dict[str, Any], tool: Listed) -> bool:
    """OpenAI's rule: every call needs approval unless "never", or the tool matches "never"'s filter."""
    if isinstance(policy, str):
        return policy != "never"
    never = policy.get("never")
    return never is None or not matching(never)(tool)


def allowing(allowed: list[str] | dict[str, Any] | None) -> Rule:
    """`allowed_tools` as a rule: every tool, the tools named, or those its filter matches."""
    if allowed is None:
        return mcp_calls.every_tool
    return mcp_calls.only(allowed) if isinstance(allowed, list) else matching(allowed)


def requested(tools: Iterable[Mapping[str, Any]]) -> dict[str, McpTool]:
    """The request's mcp tools by label: a server the operator configured (LLM_MCP_SERVERS) named by
    its label alone, or a server_url cleared against LLM_MCP_ALLOW (a 400 otherwise)."""
    found = {}
    for index, tool in enumerate(tools):
        if tool["type"] != "mcp":
            continue
        label, headers = tool["server_label"], dict(tool.get("headers") or {})
        if tool.get("authorization"):  # OpenAI's OAuth access token, sent as a bearer token
            headers["Authorization"] = f"Bearer {tool['authorization']}"
        for hosted in ("connector_id", "tunnel_id"):
            if tool.get(hosted) and not tool.get("server_url"):
                raise InvalidRequestError(
                    f"{hosted}: OpenAI's hosted connectors and tunnels are not on this server; name the MCP "
                    "server by server_url (or a server_label LLM_MCP_SERVERS configures)",
                    param=f"tools[{index}].{hosted}",
                )
        if tool.get("server_url"):
            server = named_by_url(label, tool["server_url"], headers, f"tools[{index}].server_url")
        else:
            server = configured(label, headers, f"tools[{index}].server_label")
        allowed = tool.get("allowed_tools")
        policy = tool.get("require_approval") or "always"
        found[label] = McpTool(server, allowing(allowed), functools.partial(needs_approval, policy))
    return found


def as_chat_choice(choice: str | Mapping[str, str] | None) -> str | Mapping[str, str] | None:
    """A tool_choice naming an MCP server's tool as the chat request takes it (a server alone: required)."""
    if isinstance(choice, Mapping) and "server_label" in choice:
        return {"name": choice["name"]} if choice.get("name") else "required"
    return choice


def answered(
    items: Sequence[Mapping[str, Any]], new_input: Sequence[Mapping[str, Any]], servers: Container[str]
) -> list[tuple[Mapping[str, Any], bool]]:
    """The approval requests this request's input answers, each with the answer; not those a call
    made already answered (a stateless client sends its whole conversation, old answers too). A
    400 for one no request made, or whose server is not among this request's mcp tools."""
    requests = {i["id"]: i for i in items if i["type"] == "mcp_approval_request"}
    made = {i.get("approval_request_id") for i in items if i["type"] == "mcp_call"}
    found = []
    for answer in new_input:
        if answer["type"] != "mcp_approval_response":
            continue
        asked = requests.get(answer["approval_request_id"])
        if asked is None:
            raise InvalidRequestError(
                f"no mcp_approval_request with id {answer['approval_request_id']!r} in the conversation",
                param="input",
            )
        if asked["id"] in made:
            continue
        if asked["server_label"] not in servers:
            raise InvalidRequestError(
                f"the approved call is to the MCP server {asked['server_label']!r}, which is not among this "
                "request's mcp tools",
                param="tools",
            )
        found.append((asked, bool(answer["approve"])))
    return found
