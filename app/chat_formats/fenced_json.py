"""A JSON answer bare or in a ```json fence, as llama-server's chat reads one under a response format.

llama-server's autoparser (common/chat-auto-parser-generator.cpp) lets a model under a JSON
response format answer the JSON bare or fenced (```json ... ```), whitespace around as
llama.cpp's converter allows, and its message content is the JSON alone. `unwrap` reads
an answer so; read part-way, it gives only what can no longer change (a stream sends that).
"""

from __future__ import annotations

OPEN, CLOSE = "```json", "```"
_SPACE = " \t\n"


def unwrap(text: str, partial: bool) -> str:
    """The JSON of `text`: without the fence or the whitespace around it."""
    body = text.lstrip(_SPACE)
    if partial and OPEN.startswith(body):
        return ""  # bare or fenced is not yet known
    if not body.startswith(OPEN):
        return body.rstrip(_SPACE)
    body = body[len(OPEN) :].lstrip(_SPACE)
    if partial:
        return body.rstrip(_SPACE + "`")  # trailing whitespace and backquotes may be the closing fence
    body = body.rstrip(_SPACE)
    return body.removesuffix(CLOSE).rstrip(_SPACE)
