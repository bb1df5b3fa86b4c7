"""Which of an MCP server's tools Anthropic's connector offers: tool_configuration, or an mcp_toolset."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.anthropic.conversion import messages
from app.api.anthropic.mcp_connector import _allowed


@pytest.mark.parametrize(
    ("configuration", "toolset", "any_toolset", "on", "off"),
    [
        (None, None, False, ["add", "fail"], []),
        ({"allowed_tools": ["add"]}, None, False, ["add"], ["fail"]),
        ({"enabled": False}, None, False, [], ["add"]),
        (None, None, True, [], ["add"]),  # the request uses toolsets, and none names this server
        (None, {"configs": {"fail": {"enabled": False}}}, True, ["add"], ["fail"]),
        (
            None,
            {"default_config": {"enabled": False}, "configs": {"add": {"enabled": True}}},
            True,
            ["add"],
            ["fail"],
        ),
    ],
)
def test_the_tools_on(
    configuration: dict[str, Any] | None, toolset: dict[str, Any] | None, any_toolset: bool,
    on: list[str], off: list[str],
) -> None:  # fmt: skip
    allows = _allowed({"tool_configuration": configuration}, toolset, any_toolset)
    assert all(allows({"name": name}) for name in on)
    assert not any(allows({"name": name}) for name in off)


def test_a_turn_with_server_calls_is_each_call_then_its_result() -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "2+3?"}]},
            {"role": "assistant", "content": [
                {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "add", "server_name": "calc",
                 "input": {"a": 2}},
                {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "content": "5", "is_error": False},
                {"type": "text", "text": "It is 5."},
            ]},
        ]
    }  # fmt: skip
    turns = messages(body)
    assert [t["role"] for t in turns] == ["user", "assistant", "tool", "assistant"]
    assert turns[1]["tool_calls"][0]["function"]["name"] == "add" and turns[2]["content"] == "5"
    assert turns[3]["content"] == "It is 5."
