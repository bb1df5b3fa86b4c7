"""`POST /v1/responses/compact`: a long conversation shortened by the served model, for the next turns.

Codex calls it when a session nears the context's end. As OpenAI's, the answer holds the
conversation's user messages and one `compaction` item, whose `encrypted_content` stands
for everything else: here, a summary the served model writes of the whole conversation,
sealed with the server's key (http/sealing.py). A later request that carries the item is
given the summary in its place (conversion.py). The conversation is summarised whole if
it fits the context, else without its oldest turns.
"""

from __future__ import annotations

import time
from typing import Any

from app.api.generation.loop import ChoiceResult
from app.api.http.sealing import Sealer
from app.api.prompting.items import new_id, with_id
from app.api.responses import objects
from app.api.responses.request import ResponseRequest
from app.chat_formats.answer import AnswerReader

SUMMARIZE = (
    "Write a summary of the conversation so far that lets it be continued from the summary alone: "
    "what the user asked for, what was done and found (files, commands, results), the decisions "
    "made, and what is left to do. Be concise and specific; answer with the summary only."
)


def summarising(asked: ResponseRequest, items: list[dict[str, Any]]) -> ResponseRequest:
    """The Responses request that makes the summary of `items` (the whole conversation)."""
    return ResponseRequest(
        input=(*items, {"type": "message", "role": "user", "content": SUMMARIZE}),
        model=asked.model,
        instructions=asked.instructions,
        truncation="auto",  # the oldest turns dropped if need be, a quarter of the context kept for it
        tool_choice="none",
    )


class CompactionPresenter:
    """The compacted conversation: its user messages, then the summary as a sealed compaction item."""

    def __init__(
        self, items: list[dict[str, Any]], prompt_tokens: int, reader: AnswerReader, sealer: Sealer
    ) -> None:
        self.users = [item for item in items if item["type"] == "message" and item["role"] == "user"]
        self.prompt_tokens, self.reader, self.sealer = prompt_tokens, reader, sealer

    def build(self, results: list[ChoiceResult]) -> dict[str, Any]:
        (result,) = results
        summary = self.reader.read(result.text, partial=False).content.strip()
        compaction = {
            "type": "compaction",
            "id": new_id("cmp"),
            "encrypted_content": self.sealer.seal(summary),
        }
        return {
            "id": new_id("resp"),
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*(with_id(item) for item in self.users), compaction],
            "usage": objects.usage(self.prompt_tokens, result.completion_tokens, result.cached_tokens),
        }

    def events(self, chunks: Any) -> Any:  # the compaction is never streamed (the view refuses it)
        raise NotImplementedError

    def failure(self, error: Any) -> bytes:
        raise NotImplementedError
