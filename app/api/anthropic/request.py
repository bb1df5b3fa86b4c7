"""A Messages request as its view needs it: the chat it amounts to, and what only Anthropic's API asks
(the tools it runs itself, the MCP connector's servers, the prefix `cache_control` pins)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.api.requests.chat import ChatRequest


@dataclass(frozen=True)
class MessagesRequest:
    """`POST /v1/messages`, validated: nothing of it is read from the body again."""

    chat: ChatRequest
    skipped_tools: tuple[str, ...] = ()  # the types of the tools Anthropic runs itself, left out
    mcp_servers: tuple[Mapping[str, Any], ...] = ()  # the MCP connector's servers, as validated
    mcp_toolsets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # by server name
    # The conversation with a marker after its last `cache_control` breakpoint (pins.py), made when
    # asked (loading it again reads its images again), and how long that prefix stays pinned.
    marked: Callable[[], ChatRequest] | None = None
    pin_seconds: float = 300.0
    context_management: bool = False  # the answer reports the context edits applied

    @property
    def model(self) -> str | None:
        return self.chat.model
