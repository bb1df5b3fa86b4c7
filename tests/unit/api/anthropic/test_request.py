"""A Messages request loads once into what its view needs: nothing is read from the body again."""

from __future__ import annotations

from app.api.anthropic.pins import MARK
from app.api.anthropic.request import MessagesRequest
from app.api.anthropic.schemas import messages_request_schema

USER = {
    "role": "user",
    "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
}


def test_anthropics_own_parts_are_typed_beside_the_chat() -> None:
    asked = messages_request_schema.load(
        {
            "model": "m",
            "max_tokens": 8,
            "messages": [USER],
            "tools": [
                {"type": "web_search_20250305", "name": "web_search"},
                {"type": "mcp_toolset", "mcp_server_name": "docs"},
                {"name": "f", "input_schema": {"type": "object"}},
            ],
            "mcp_servers": [{"type": "url", "url": "https://mcp.example/sse", "name": "docs"}],
            "context_management": {"edits": []},
        }
    )
    assert isinstance(asked, MessagesRequest) and asked.model == "m"
    assert asked.skipped_tools == ("web_search_20250305",)
    assert [server["name"] for server in asked.mcp_servers] == ["docs"]
    assert set(asked.mcp_toolsets) == {"docs"}
    assert asked.context_management and asked.pin_seconds == 3600.0
    # The conversation with the marker after the last breakpoint, as the chat it amounts to.
    assert asked.marked is not None and MARK in str(asked.marked.messages)
    assert MARK not in str(asked.chat.messages)


def test_a_request_without_breakpoints_pins_nothing() -> None:
    plain = {"role": "user", "content": "hi"}
    asked = messages_request_schema.load({"model": "m", "max_tokens": 8, "messages": [plain]})
    assert asked.marked is None and asked.skipped_tools == () and not asked.mcp_servers
    assert asked.pin_seconds == 300.0 and not asked.context_management
