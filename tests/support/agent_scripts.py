"""A tool call a coding agent is answered with, in its own protocol, so that its next request is a tool loop.

The agents' test model only says "Hello": it never calls a tool. The recording proxy answers
each agent's first request of a turn with a call of the agent's own file-reading tool (Claude
Code's Read, Codex's exec_command running `cat`, opencode's read) on a file in its working
folder; the agent runs it and sends its result in a real request, which the server answers.
Anthropic's and the Responses API's calls are made by the server's own presenters (their
events exactly as the server streams them); chat completions' chunks are written here.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.api.anthropic.presenter import MessagesPresenter
from app.api.responses.objects import ResponseHeader
from app.api.responses.presenter import ResponsesPresenter
from app.engine.types import Chunk
from harness.recording_proxy import Exchange, Script
from tests.support.formats import reader

NOTES = "notes.txt"
MARKER = "agent-notes-7f3a9c"  # what the file holds, and so what the tool's result must carry


def _tool(name: str) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}]


def _one(chunks: list[Chunk]) -> Iterator[Chunk | None]:
    return iter(chunks)


def anthropic_call(model: str, path: Path) -> bytes:
    """Claude Code's Read of `path`, as Anthropic's event stream."""
    call = json.dumps({"name": "Read", "arguments": {"file_path": str(path)}})
    presenter = MessagesPresenter(model, 10, reader(_tool("Read")))
    return b"".join(presenter.events(_one([Chunk(call, "stop", 12)])))


def responses_call(model: str) -> bytes:
    """Codex's exec_command running `cat notes.txt`, as the Responses API's event stream."""
    call = json.dumps({"name": "exec_command", "arguments": {"cmd": f"cat {NOTES}"}})
    presenter = ResponsesPresenter(ResponseHeader({"input": ""}, model), 10, reader(_tool("exec_command")))
    return b"".join(presenter.events(_one([Chunk(call, "stop", 12)])))


def chat_call(model: str, path: Path) -> bytes:
    """opencode's read of `path`, as chat completions' chunks."""
    head = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    call = {"index": 0, "id": "call_scripted1", "type": "function",
            "function": {"name": "read", "arguments": json.dumps({"filePath": str(path)})}}  # fmt: skip
    chunks = [
        {
            **head,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}, "finish_reason": None}
            ],
        },
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {**head, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


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
        if agent == "claude":
            return 200, "text/event-stream", anthropic_call(model, work / NOTES)
        if agent == "codex":
            return 200, "text/event-stream", responses_call(model)
        return 200, "text/event-stream", chat_call(model, work / NOTES)

    return script
