"""Anthropic's `cache_control` pins a prompt prefix: how many tokens its last breakpoint covers.

The pinned prefix (the engine's `PinnedPrefix`) stays in the host cache over other states for
the breakpoint's ttl (`pin_seconds`), and it makes usage honest.

Anthropic reports a request's input in three parts: read from the cache
(`cache_read_input_tokens`), written to it at a `cache_control` breakpoint
(`cache_creation_input_tokens`), and the rest (`input_tokens`). Here every evaluated
prefix is cached anyway, so a breakpoint only says where "written" ends: the tokens up to
the last marked block that were not read from the cache. Where that block ends in the
prompt is found by rendering the request once more with a marker after it (the template
decides where a block's text lands) and counting the tokens before the marker.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from app.engine.scheduling import common_prefix

MARK = "zzLLMCACHEBREAKPOINTzz"  # ASCII: it reads the same inside a template's JSON of the tools

Where = tuple[Any, ...]


def last_breakpoint(body: dict[str, Any]) -> Where | None:
    """The last block with `cache_control`, in the order Anthropic caches: tools, system, messages."""
    found: Where | None = None
    for i, tool in enumerate(_listed(body.get("tools"))):  # (in order, with where each is)
        if _marked(tool):
            found = ("tools", i)
    for i, block in enumerate(_listed(body.get("system"))):
        if _marked(block):
            found = ("system", i)
    for j, message in enumerate(_listed(body.get("messages"))):
        content = message.get("content") if isinstance(message, dict) else None
        for k, block in enumerate(_listed(content)):
            if _marked(block):
                found = ("messages", j, k)
    return found


def pin_seconds(body: dict[str, Any]) -> float:
    """How long the marked prefix is to stay cached after a use: the longest `ttl` asked ("1h"), else
    Anthropic's default of five minutes."""
    marks = [b["cache_control"] for b in _blocks(body) if _marked(b)]
    return 3600.0 if any(mark.get("ttl") == "1h" for mark in marks) else 300.0


def with_mark(body: dict[str, Any], where: Where) -> dict[str, Any]:
    """A copy of `body` with the marker at the end of the block at `where`."""
    marked = copy.deepcopy(body)
    if where[0] == "tools":
        tool = marked["tools"][where[1]]
        tool["description"] = (tool.get("description") or "") + MARK
        return marked
    blocks = marked["system"] if where[0] == "system" else marked["messages"][where[1]]["content"]
    block = blocks[where[-1]]
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        block["text"] += MARK
    elif block.get("type") == "tool_result":
        content = block.get("content") or ""
        block["content"] = content + MARK if isinstance(content, str) else [*content, _text(MARK)]
    else:  # an image or a call: the marker follows it in the same message
        blocks.insert(where[-1] + 1, _text(MARK))
    return marked


def marked_body(body: dict[str, Any]) -> dict[str, Any] | None:
    """A copy of the request with the marker after its last breakpoint (None: it has none)."""
    where = last_breakpoint(body)
    return None if where is None else with_mark(body, where)


def pinned_tokens(
    marked_text: str,
    prompt_tokens: list[int],
    tokenize: Callable[[str], list[int]],
    spelt: Callable[[str], int | None] = lambda prefix: None,
) -> int:
    """The prompt tokens up to the marker in the marked request's prompt text (0: the template
    dropped it, or the prompt made is not the one the text begins): read off the prompt's own
    tokens by `spelt` where it can (a prefix of the prompt's text), else by tokenizing the prefix."""
    at = marked_text.find(MARK)
    if at < 0:
        return 0
    counted = spelt(marked_text[:at])
    return counted if counted is not None else common_prefix(tokenize(marked_text[:at]), prompt_tokens)


def _blocks(body: dict[str, Any]) -> list[Any]:
    """Every block that may carry `cache_control`: tools, system blocks, message content blocks."""
    blocks = _listed(body.get("tools")) + _listed(body.get("system"))
    for message in _listed(body.get("messages")):
        blocks += _listed(message.get("content") if isinstance(message, dict) else None)
    return blocks


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and isinstance(block.get("cache_control"), dict)


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}
