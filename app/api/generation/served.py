"""What planning takes from where a request arrived, read from Flask's globals: the one place that does.

A view calls `plan_inputs()` once; the chat job and planning get what it read as plain values,
so a loop that plans again away from the view (MCP calls, a background run) needs no request.
"""

from __future__ import annotations

from flask import current_app, g, request

from app.api.generation.planning import PlanInputs
from app.settings.current import current_config

# Claude Code's, on every request of a session (its turns and its side requests alike).
SESSION_HEADER = "X-Claude-Code-Session-Id"


def plan_inputs() -> PlanInputs:
    """The server's settings, the model's memory, the request's key, its priority and session headers."""
    config = current_config()
    key = g.get("api_key")
    header = config.priority_header
    return PlanInputs(
        config=config,
        memory=getattr(current_app.extensions.get("engine"), "memory_kind", None),
        key_name=None if key is None else key.name,
        priority_header=request.headers.get(header) if header else None,
        tenant=key is not None and not key.operator,
        session_header=request.headers.get(SESSION_HEADER),
    )
