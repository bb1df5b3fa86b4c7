"""A Messages request loads once into what its view needs: nothing is read from the body again."""

from __future__ import annotations

import base64

from flask import Flask

from app.api.anthropic.pins import MARK
from app.api.anthropic.request import MessagesRequest
from app.api.anthropic.schemas import messages_request_schema

# The smallest PNG: one transparent pixel.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a3d20000000049454e44ae426082"
    )
).decode()
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
    assert asked.marked is not None and MARK in str(asked.marked().messages)
    assert MARK not in str(asked.chat.messages)


def test_a_request_without_breakpoints_pins_nothing() -> None:
    plain = {"role": "user", "content": "hi"}
    asked = messages_request_schema.load({"model": "m", "max_tokens": 8, "messages": [plain]})
    assert asked.marked is None and asked.skipped_tools == () and not asked.mcp_servers
    assert asked.pin_seconds == 300.0 and not asked.context_management


def test_the_marked_conversation_is_made_only_when_asked(decodes: list[str], app: Flask) -> None:
    # Making it loads the blocks again, images included (a URL would be fetched again): the view
    # asks for it only for a prompt without media, so parsing must not.
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
    marked_text = {"type": "text", "text": "what is it?", "cache_control": {"type": "ephemeral"}}
    message = {"role": "user", "content": [image, marked_text]}
    with app.app_context():  # the media limits are the settings'
        asked = messages_request_schema.load({"model": "m", "max_tokens": 8, "messages": [message]})
        assert len(decodes) == 1 and asked.marked is not None
        asked.marked()
    assert len(decodes) == 2
