"""The reasoning a model writes between its thinking tags, split from the answer that follows."""

from __future__ import annotations

from app.chat_formats.base import held_back


def split(text: str, tags: tuple[str, str], partial: bool, opened: bool) -> tuple[str, str]:
    """(reasoning, answer). `opened`: the prompt itself ended inside the tags (thinking forced on).

    An answer that stops while still thinking (max_tokens) is all reasoning, as llama-server
    reports it. While `partial`, a tail that may be a tag is held back.
    """
    opening, closing = tags
    body = text
    if not opened:
        stripped = text.lstrip()
        if partial and opening.startswith(stripped) and stripped != opening:
            return "", ""  # may be the opening tag: wait
        if not stripped.startswith(opening):
            return "", text
        body = stripped[len(opening) :]
    end = body.find(closing)
    if end < 0:
        reasoning = body[: len(body) - held_back(body, (closing,))] if partial else body
        return reasoning.lstrip("\n"), ""
    return body[:end].strip("\n"), body[end + len(closing) :].lstrip()
