"""LLM_WARM_SET: requests each worker sends itself once its model is loaded, caching their prompts.

A coding agent's first request carries thousands of tokens of system prompt and tool
descriptions (Claude Code's about 12,000), which a small CPU takes tens of seconds to
evaluate. Named here, that preamble is evaluated (or read back from the disk tier) as the
worker starts, so the agent's first turn after a restart finds it cached. The file is
JSON Lines, a request per line in the shape of OpenAI's batch input:
`{"url": "/v1/messages", "body": {...}, "key": "alice"}` (`custom_id` and `method: POST`
allowed and ignored), `key` naming the API key whose cache the prompt goes to.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The routes whose prompts a worker caches, and the body field that cuts each answer to one token.
ROUTES = {
    "/v1/chat/completions": "max_tokens",
    "/v1/completions": "max_tokens",
    "/v1/messages": "max_tokens",
    "/v1/responses": "max_output_tokens",
    "/api/chat": None,  # Ollama's: options.num_predict
    "/api/generate": None,
}
MAX_LINES = 256  # each is evaluated at every start, by every worker of its model
MAX_BYTES = 64 << 20
FIELDS = {"url", "body", "key", "custom_id", "method"}


@dataclass(frozen=True)
class WarmRequest:
    """One line of the warm set: where it goes, its body as the client sends it, and whose it is."""

    line: int
    url: str
    body: dict[str, Any] = field(compare=False)
    key: str | None = None  # an API key's name (LLM_API_KEYS' `name:key`, the keys file's names)

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) and model else None

    def one_token(self) -> dict[str, Any]:
        """The body asking for one token of answer, unstreamed and unstored: the prompt is the point."""
        body = {**self.body, "stream": False}
        limit = ROUTES[self.url]
        if limit is None:
            body["options"] = {**(body.get("options") or {}), "num_predict": 1}
        else:
            body[limit] = 1
        if self.url == "/v1/responses":
            body.update(store=False, background=False)
        return body


def parse(raw: str) -> tuple[WarmRequest, ...]:
    """The requests of the file `raw` names ("" for none); ValueError says what is wrong, and where."""
    if not raw:
        return ()
    path = Path(raw)
    try:
        if path.stat().st_size > MAX_BYTES:
            raise ValueError(f"{raw} is larger than {MAX_BYTES >> 20} MiB")
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {raw}: {exc}") from None
    requests = tuple(_request(n, line) for n, line in enumerate(lines, start=1) if line.strip())
    if len(requests) > MAX_LINES:
        raise ValueError(f"{raw} holds {len(requests)} requests; a warm set takes at most {MAX_LINES}")
    return requests


def _request(number: int, line: str) -> WarmRequest:
    try:
        fields = json.loads(line)
    except (ValueError, RecursionError):
        raise ValueError(f"line {number} is not valid JSON") from None
    if not isinstance(fields, dict):
        raise ValueError(f"line {number} is not a JSON object")
    if unknown := sorted(set(fields) - FIELDS):
        raise ValueError(f"line {number}: unknown field {unknown[0]!r} (a line has url, body and key)")
    if fields.get("method", "POST") != "POST":
        raise ValueError(f'line {number}: method must be "POST"')
    url, body, key = fields.get("url"), fields.get("body"), fields.get("key")
    if url not in ROUTES:
        raise ValueError(f"line {number}: url must be one of {', '.join(ROUTES)}")
    if not isinstance(body, dict):
        raise ValueError(f"line {number}: body must be a JSON object, the request as a client sends it")
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError(f"line {number}: key must be an API key's name")
    return WarmRequest(number, url, body, key)
