"""Tools a request offers that this server cannot run: left out, with a warning in the log and a header.

Coding agents offer tools their vendor's API runs itself (Codex: `web_search`; Anthropic's
`web_search_20250305`, `code_execution_...`). llama-server skips the tool types it lacks
with a warning rather than refusing the request, and so does this server: the model is
offered the other tools, the log says which were left out, and so does the answer's
X-Skipped-Tools header, for a client that wants to know.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from flask import Flask, Response, g

HEADER = "X-Skipped-Tools"
log = logging.getLogger(__name__)


SHOWN = 20  # kinds named in the header and the log; past that, how many more


def skip(kinds: Sequence[str]) -> None:
    """Note the tools of these types (or names) as left out of this request. They are the client's
    text: each is written as a JSON string's inside (a line break as \\n, no character past ASCII),
    bounded, so it can neither break the header it goes into nor start a line of the log."""
    unique = [json.dumps(kind[:80])[1:-1] for kind in dict.fromkeys(kinds)]
    if len(unique) > SHOWN:
        unique = [*unique[:SHOWN], f"and {len(unique) - SHOWN} more"]
    if not unique:
        return
    log.warning("tools this server cannot run were left out: %s", ", ".join(unique))
    g.skipped_tools = unique


def init_app(app: Flask) -> None:
    @app.after_request
    def said(response: Response) -> Response:
        skipped = g.get("skipped_tools")
        if skipped:
            response.headers[HEADER] = ", ".join(skipped)
        return response
