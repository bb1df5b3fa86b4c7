"""A tool call a coding agent is answered with, in its own protocol, so that its next request is a tool loop.

The agents' test model only says "Hello": it never calls a tool. The recording proxy answers
each agent's first request of a turn with a call of the agent's own file-reading tool (Claude
Code's Read, Codex's exec_command running `cat`, opencode's read) on a file in its working
folder (harness/agent_answers.py writes it in the agent's protocol); the agent runs it and
sends its result in a real request, which the server answers.
"""

from __future__ import annotations

import threading
from pathlib import Path

from harness import agent_answers
from harness.recording_proxy import Exchange, Script

NOTES = "notes.txt"
MARKER = "agent-notes-7f3a9c"  # what the file holds, and so what the tool's result must carry


def tool_loop(agent: str, work: Path, model: str) -> Script:
    """A script that answers the agent's first request with tools (its turn, not a side request such as
    opencode's title) with a call of its file-reading tool, once; everything else goes to the server."""
    (work / NOTES).write_text(f"The notes say: {MARKER}\n")
    done = threading.Event()

    def script(exchange: Exchange) -> tuple[int, str, bytes] | None:
        if done.is_set() or exchange.method != "POST" or not exchange.body:
            return None
        if not exchange.json().get("tools"):
            return None
        done.set()
        return (
            200,
            "text/event-stream",
            agent_answers.stream_for(exchange.path, model, agent_answers.file_read(agent, work / NOTES)),
        )

    return script
