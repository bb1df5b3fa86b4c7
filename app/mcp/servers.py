"""What the MCP client is given and raises: a server (where, how, with which headers), its tools,
the bounds of one exchange. Kept apart from the client so that naming a server does not import the SDK."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class McpError(Exception):
    """An MCP server could not be reached, refused, failed, or answered too much or too late."""


@dataclass(frozen=True)
class Pin:
    """The URL's host, and the address its name was checked to resolve to (connect there only)."""

    host: str
    address: str
    port: int


@dataclass(frozen=True)
class McpServer:
    """Where an mcp tool points: a URL (a request's: cleared and `pin`ned; the operator's: as
    configured) or a `command` run over stdio; and the headers to send."""

    label: str
    url: str = ""
    pin: Pin | None = None
    command: tuple[str, ...] = ()
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # credentials: never printed


@dataclass(frozen=True)
class Tool:
    """One tool as the server lists it."""

    name: str
    description: str | None
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None


@dataclass(frozen=True)
class Limits:
    seconds: float
    output_bytes: int
