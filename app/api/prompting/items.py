"""Input items, as clients send them and as the server keeps them: checked, normalised, given ids.

The Responses API's input, a stored conversation's items and the items a client adds to
one all pass through `normalized_input`; `with_id` turns a normalised item back into
OpenAI's shape, with an id, to keep and list.
"""

from __future__ import annotations

import uuid
from typing import Any

from marshmallow import ValidationError

from app.api.http import fetch, media, sealing
from app.api.http.media import MediaError

_ROLES = ("user", "assistant", "system", "developer")
_TEXT_PARTS = ("input_text", "output_text")


def _text_of(content: Any, where: str) -> str:
    """A message's content, a string or a list of input_text/output_text parts, as one string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationError(f"{where}: must be a string or a list of content parts")
    texts = []
    for index, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in _MEDIA_PARTS:
            texts.append(_media_of(part, f"{where}[{index}]"))
            continue
        if kind not in _TEXT_PARTS:
            raise ValidationError(
                f"{where}[{index}]: content part type {kind!r} is not supported; "
                "use input_text or input_image"
            )
        if not isinstance(part.get("text"), str):
            raise ValidationError(f"{where}[{index}].text: must be a string")
        texts.append(part["text"])
    return "".join(texts)


_MEDIA_PARTS = ("input_image", "input_file")


def _media_of(part: dict[str, Any], where: str) -> str:
    """An input_image part (a data URL), or an input_file whose file_data is an image's data URL, as
    the marker that carries it in the text."""
    key = "image_url" if part["type"] == "input_image" else "file_data"
    url = part.get(key)
    if not isinstance(url, str):
        other = "file_id" if part.get("file_id") else key
        raise ValidationError(f"{where}.{other}: send the image inline, as a data URL in {key}")
    if key == "file_data" and not url.startswith("data:image/"):
        raise ValidationError(f"{where}.file_data: only images are read from input_file (data:image/...)")
    try:
        return media.embed("image", fetch.media_at(url, key), key)
    except MediaError as exc:
        raise ValidationError(f"{where}.{exc.field}: {exc}") from None


_TEXT_PART = {
    "user": "input_text",
    "system": "input_text",
    "developer": "input_text",
    "assistant": "output_text",
}


def normalized_input(value: Any) -> list[dict[str, Any]]:
    """`input` (a string or OpenAI's items) as this server's items: text content, no ids."""
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if not isinstance(value, list):
        raise ValidationError("must be a string or a list of items")
    items = [_normalized_item(item, f"[{i}]") for i, item in enumerate(value)]
    return [item for item in items if item is not None]


# Items of tools OpenAI's servers run, which a conversation carried over from another provider may
# hold: nothing this server made or can show the model, left out of the prompt.
HOSTED_ITEMS = frozenset({
    "web_search_call", "file_search_call", "image_generation_call", "code_interpreter_call",
    "computer_call", "computer_call_output", "local_shell_call", "local_shell_call_output",
    "tool_search_call", "tool_search_output",
})  # fmt: skip


def _normalized_item(item: Any, where: str) -> dict[str, Any] | None:
    """One item, checked; stored items (with ids, status, annotations) come back through here too."""
    if not isinstance(item, dict):
        raise ValidationError(f"{where}: must be an object")
    kind = item.get("type", "message")
    if kind == "message":
        if item.get("role") not in _ROLES:
            raise ValidationError(f"{where}.role: must be one of {', '.join(_ROLES)}")
        return {
            "type": "message",
            "role": item["role"],
            "content": _text_of(item.get("content"), f"{where}.content"),
        }
    if kind in _CALL_PREFIXES:
        return _call_item(item, kind, where)
    if kind in ("reasoning", "compaction"):
        return _carried(item, kind, where)
    if kind in HOSTED_ITEMS:
        return None
    if kind in MCP_ITEMS:
        return _mcp_item(item, kind, where)
    raise ValidationError(f"{where}.type: item type {kind!r} is not supported by this server")


def _call_item(item: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """A function or custom tool call (its namespace kept), or its output."""
    if kind.endswith("_output"):
        if not isinstance(item.get("call_id"), str):
            raise ValidationError(f"{where}.call_id: must be a string")
        output = item.get("output")
        text = output if isinstance(output, str) else _text_of(output, f"{where}.output")
        return {"type": kind, "call_id": item["call_id"], "output": text}
    given = "arguments" if kind == "function_call" else "input"
    for key in ("call_id", "name", given):
        if not isinstance(item.get(key), str):
            raise ValidationError(f"{where}.{key}: must be a string")
    called = {k: item[k] for k in ("type", "call_id", "name", given)}
    if isinstance(item.get("namespace"), str):  # a tool of a namespace (Codex's)
        called["namespace"] = item["namespace"]
    return called


def _carried(item: dict[str, Any], kind: str, where: str) -> dict[str, Any] | None:
    """What a stateless client carries from turn to turn: the model's reasoning (its text, or sealed by
    this server in encrypted_content), or a compaction's summary (sealed; another server's: left out)."""
    if kind == "reasoning":
        parts = [p for key in ("content", "summary") if isinstance(item.get(key), list) for p in item[key]]
        texts = [str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if not texts and isinstance(item.get("encrypted_content"), str):
            texts = [sealing.current().unseal(item["encrypted_content"]) or ""]
        return {"type": kind, "text": "\n".join(texts)}
    blob = item.get("encrypted_content")
    if not isinstance(blob, str):
        raise ValidationError(f"{where}.encrypted_content: must be a string")
    summary = sealing.current().unseal(blob)
    return None if summary is None else {"type": kind, "summary": summary, "encrypted_content": blob}


# The Responses API's MCP items, as a response's output gives them and the next request's input
# carries them back: with the fields that matter (an approval request keeps its id, which the
# approval response names).
MCP_ITEMS = {
    "mcp_list_tools": ("server_label", "tools", "error"),
    "mcp_call": ("server_label", "name", "arguments", "output", "error", "approval_request_id"),
    "mcp_approval_request": ("id", "server_label", "name", "arguments"),
    "mcp_approval_response": ("approval_request_id", "approve", "reason"),
}
_CALL_PREFIXES = {"function_call": "fc", "function_call_output": "fco", "custom_tool_call": "ctc",
                  "custom_tool_call_output": "ctco"}  # fmt: skip
_MCP_PREFIXES = {"mcp_list_tools": "mcpl", "mcp_call": "mcp", "mcp_approval_request": "mcpr"}
_MCP_REQUIRED = {
    "mcp_list_tools": ("server_label",),
    "mcp_call": ("server_label", "name", "arguments"),
    "mcp_approval_request": ("id", "server_label", "name", "arguments"),
    "mcp_approval_response": ("approval_request_id",),
}


def _mcp_item(item: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    for key in _MCP_REQUIRED[kind]:
        if not isinstance(item.get(key), str):
            raise ValidationError(f"{where}.{key}: must be a string")
    if kind == "mcp_approval_response" and not isinstance(item.get("approve"), bool):
        raise ValidationError(f"{where}.approve: must be true or false")
    if kind == "mcp_list_tools" and not isinstance(item.get("tools", []), list):
        raise ValidationError(f"{where}.tools: must be a list")
    return {"type": kind, **{key: item.get(key) for key in MCP_ITEMS[kind]}}


def _parts(role: str, content: str) -> list[dict[str, Any]]:
    """A stored message's content as OpenAI's parts: its text, and each image as an input_image."""
    parts: list[dict[str, Any]] = []
    for kind, value in media.pieces(content):
        if kind == "image":
            parts.append({"type": "input_image", "image_url": value, "detail": "auto"})
            continue
        part: dict[str, Any] = {"type": _TEXT_PART[role], "text": value}
        if part["type"] == "output_text":
            part["annotations"] = []
        parts.append(part)
    return parts


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def with_id(item: dict[str, Any], item_id: str | None = None) -> dict[str, Any]:
    """A normalised input item in OpenAI's shape, with an id (`item_id`, else a new one), to keep and list."""
    kind = item["type"]
    if kind == "message":
        return {
            "type": "message",
            "id": item_id or new_id("msg"),
            "role": item["role"],
            "content": _parts(item["role"], item["content"]),
            "status": "completed",
        }
    if kind in _CALL_PREFIXES:
        return {**item, "id": item_id or new_id(_CALL_PREFIXES[kind]), "status": "completed"}
    if kind == "compaction":
        return {"type": kind, "id": item_id or new_id("cmp"), "encrypted_content": item["encrypted_content"]}
    if kind in MCP_ITEMS:
        prefix = _MCP_PREFIXES.get(kind, "mcpa")
        return {**item, "id": item.get("id") or item_id or new_id(prefix), **_mcp_status(item)}
    return {  # reasoning
        "type": "reasoning",
        "id": item_id or new_id("rs"),
        "summary": [],
        "content": [{"type": "reasoning_text", "text": item["text"]}],
    }


def _mcp_status(item: dict[str, Any]) -> dict[str, str]:
    if item["type"] != "mcp_call":
        return {}
    return {"status": "failed" if item.get("error") else "completed"}
