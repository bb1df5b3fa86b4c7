"""`GET /tools` and `POST /tools`: llama-server's routes for its web UI's tools, here the tools of the
MCP servers the operator configures (LLM_MCP_SERVERS); a 403 as llama-server's when there are none.

The chat page offers those servers from this list, fetched at every page view: a worker keeps each
server's listing for LISTING_SECONDS (a stdio server is a process started per listing), so views
do not start one each. A listing is bounded by LLM_MCP_TIMEOUT; a server that cannot list is left
out of GET (and logged, and asked again at the next request), never a 500.
"""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.http.openapi import documented
from app.api.http.roles import operator_route
from app.api.tools import openapi as doc
from app.api.tools import serving

bp = Blueprint("tools", __name__)


@bp.get("/tools")
@documented(doc.TOOLS)
def list_tools() -> Response:
    """Every configured server's tools, listed at once (one slow server holds up none of the others)."""
    return serving.listed()


@bp.post("/tools")
@operator_route
@documented(doc.CALL)
def call_tool() -> Response:
    """Call one tool with `params`: `{"plain_text_response": ...}`, or `{"error": ...}` when the
    server or the tool fails (200 both, as llama-server); 404 for a tool no server lists."""
    return serving.called()
