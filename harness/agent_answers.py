"""Answers a recording proxy gives a coding agent itself, in the agent's own protocol: text, or a tool call.

The agents' tests answer an agent's first request with a call of its own file-reading tool
(so that the request carrying the tool's result is a real one); the agent benchmark answers
every request itself while it records a session (no model needed to record, the same session
for every target). Anthropic's and the Responses API's answers are made by the server's own
presenters, their events exactly as the server streams them; chat completions' chunks are
written here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from app.api.anthropic.presenter import MessagesPresenter
from app.api.responses.objects import ResponseHeader
from app.api.responses.presenter import ResponsesPresenter
from app.api.responses.request import ResponseRequest
from app.chat_formats.answer import AnswerReader
from app.chat_formats.base import Function
from app.chat_formats.detect import by_name
from app.engine.types import Chunk

# An answer's text for the server's presenters: plain text, or our own call format's JSON object.
Answer = tuple[str, str | None]  # (text, the function it calls, if any)


def call(name: str, arguments: dict[str, Any]) -> Answer:
    return json.dumps({"name": name, "arguments": arguments}), name


def text(words: str) -> Answer:
    return words, None


def file_read(agent: str, path: Path) -> Answer:
    """A call of the agent's own file-reading tool on `path` (in its working folder)."""
    if agent == "claude":
        return call("Read", {"file_path": str(path)})
    if agent == "codex":
        return call("exec_command", {"cmd": f"cat {path.name}"})
    return call("read", {"filePath": str(path)})


def _reader(function: str | None) -> AnswerReader:
    functions = (Function(function, {"type": "object"}),) if function else ()
    return AnswerReader(by_name("Generic"), functions, False)


def anthropic_stream(model: str, answer: Answer) -> bytes:
    """Anthropic's event stream of one Message holding `answer`."""
    presenter = MessagesPresenter(model, 10, _reader(answer[1]))
    return b"".join(presenter.events(iter([Chunk(answer[0], "stop", 12)])))


def responses_stream(model: str, answer: Answer) -> bytes:
    """The Responses API's event stream of one Response holding `answer`."""
    presenter = ResponsesPresenter(ResponseHeader(ResponseRequest(input=()), model), 10, _reader(answer[1]))
    return b"".join(presenter.events(iter([Chunk(answer[0], "stop", 12)])))


def chat_stream(model: str, answer: Answer) -> bytes:
    """Chat completions' chunks of one answer holding `answer`, with the usage chunk opencode asks for."""
    head = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}  # fmt: skip
    words, function = answer
    if function is None:
        delta: dict[str, Any] = {"role": "assistant", "content": words}
        finish = "stop"
    else:
        arguments = json.dumps(json.loads(words)["arguments"])
        tool = {"index": 0, "id": "call_scripted1", "type": "function",
                "function": {"name": function, "arguments": arguments}}  # fmt: skip
        delta, finish = {"role": "assistant", "tool_calls": [tool]}, "tool_calls"
    chunks = [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**head, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22}},
    ]
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def stream_for(path: str, model: str, answer: Answer) -> bytes:
    """`answer` in the protocol of the route at `path`."""
    if path.startswith("/v1/messages"):
        return anthropic_stream(model, answer)
    if path.startswith("/v1/responses"):
        return responses_stream(model, answer)
    return chat_stream(model, answer)
