"""System turns where the chat template can take them: coding agents send them anywhere.

Claude Code sends system messages mid-conversation (and last, after the user's message);
Codex sends two developer messages before the first user message. Templates written for
one leading system message raise on the others ("System message must be at the
beginning", Gemma's "roles must alternate") or drop them silently. For such a template
(TemplateProfile.supports_late_system is false) the leading run becomes one system
message and each later one joins the user message before it, or the next user message
when the one before is not the user's: the model reads every instruction, in nearly the
order it was given, and the prompt of a conversation only grows turn by turn (its
cached prefix stays valid).
"""

from __future__ import annotations

from typing import Any

SYSTEM_ROLES = ("system", "developer")
_JOIN = "\n\n"


def placed(messages: list[dict[str, Any]], late_system: bool) -> list[dict[str, Any]]:
    """`messages` as a template reads them: unchanged if it takes system turns anywhere
    (`late_system`), else with the later ones merged as above."""
    if late_system or not _has_late_system(messages):
        return messages
    first = 0
    while first < len(messages) and messages[first]["role"] in SYSTEM_ROLES:
        first += 1
    placed_: list[dict[str, Any]] = []
    if first:
        texts = [_text(m) for m in messages[:first]]
        placed_.append({**messages[0], "content": _JOIN.join(t for t in texts if t)})
    waiting: list[str] = []  # later system texts, for the next user message
    for message in messages[first:]:
        if message["role"] in SYSTEM_ROLES:
            text = _text(message)
            if not text:
                continue
            last = placed_[-1] if placed_ else None
            if last is not None and last["role"] == "user" and isinstance(last.get("content"), str):
                placed_[-1] = {**last, "content": last["content"] + _JOIN + text}
            else:
                waiting.append(text)
            continue
        if waiting and message["role"] == "user" and isinstance(message.get("content"), str):
            message = {**message, "content": _JOIN.join([*waiting, message["content"]])}
            waiting = []
        placed_.append(message)
    if waiting:  # nothing the user said came after them: they are the last word before the answer
        placed_.append({"role": "user", "content": _JOIN.join(waiting)})
    return placed_


def _has_late_system(messages: list[dict[str, Any]]) -> bool:
    """Whether a system turn follows another message (a leading run of more than one counts)."""
    roles = [m["role"] in SYSTEM_ROLES for m in messages]
    return any(later and index > 0 for index, later in enumerate(roles))


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI's text parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""
