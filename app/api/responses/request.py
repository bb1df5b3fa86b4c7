"""A Responses request as its views need it: the items it adds, the stored turns it continues and
what its Response echoes; the chat it amounts to is conversion.as_chat's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.engine.types import Sampling

Item = Mapping[str, Any]


@dataclass(frozen=True)
class ResponseRequest:
    """`POST /v1/responses` (and its token count and compaction), validated: no view reads the body again."""

    input: tuple[Item, ...]  # this request's items, normalised; stored turns come before them
    model: str | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    sampling: Sampling = field(default_factory=Sampling)  # temperature, top_p, seed: the same names
    stream: bool = False
    tools: tuple[Item, ...] = ()  # as validated: functions, custom, namespaces, mcp, hosted (left out)
    max_tool_calls: int | None = None  # calls to MCP tools the server makes, at most
    tool_choice: str | Mapping[str, str] | None = None
    parallel_tool_calls: bool | None = None
    text_format: Item | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None
    store: bool = True  # OpenAI's default; LLM_STORE=off keeps nothing whatever is asked
    previous_response_id: str | None = None
    conversation: str | None = None  # the conversation's id, however it was given
    background: bool = False
    include: frozenset[str] = frozenset()
    top_logprobs: int | None = None
    priority: int = 0
    truncation: str | None = None  # as asked; the Response echoes the one in force
    reasoning_effort: str | None = None  # for the chat template
    return_progress: bool = False
    prompt_cache_key: str | None = None
    cache_salt: str | None = None
