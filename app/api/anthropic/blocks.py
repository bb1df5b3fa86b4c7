"""A Messages request's content blocks, checked and normalised: the shapes conversion.py reads."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields

from app.api.http import fetch, media
from app.api.http.media import MediaError

# Claude Code's first system block: per-request billing metadata for Anthropic's API, not an
# instruction to the model; some versions put a value in it that changes every request
# (`cch=`), which would make every prompt miss the cache from its first token.
BILLING_HEADER = "x-anthropic-billing-header:"


def text_of(content: Any, where: str, *, images: bool = False) -> str:
    """A string, or text blocks (and images, where `images`), as one string."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ValidationError(f"{where}: must be a string or a list of text blocks")
    texts = []
    for index, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "image" and images:
            texts.append(_image(block, f"{where}[{index}]"))
        else:
            raise ValidationError(f"{where}[{index}]: block type {kind!r} is not supported here; use text")
    return "".join(texts)


def system_text(content: Any) -> str:
    """`system` as the model reads it: its text blocks, less the billing header block."""
    if isinstance(content, list):
        content = [
            b
            for b in content
            if not (isinstance(b, dict) and str(b.get("text", "")).startswith(BILLING_HEADER))
        ]
    return text_of(content, "")


def _image(block: dict[str, Any], where: str) -> str:
    """An image block as text that carries it (app/api/http/media.py), where the block stood."""
    source = block.get("source")
    source = source if isinstance(source, dict) else {}
    kind = source.get("type")
    try:
        if kind == "base64" and isinstance(source.get("data"), str):
            return media.embed("image", media.from_base64(source["data"], "source.data"))
        if kind == "url" and isinstance(source.get("url"), str):
            return media.embed("image", fetch.media_at(source["url"], "source.url"))
    except MediaError as exc:
        raise ValidationError(f"{where}.{exc.field}: {exc}") from None
    raise ValidationError(
        f'{where}.source: must be {{"type": "base64", "media_type", "data"}} or {{"type": "url", "url"}}'
    )


def _tool_result(block: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """A tool_result (or an MCP connector's mcp_tool_result): its text, images inline, and the tools a
    tool search's result references (`tool_reference` blocks load deferred tools)."""
    if not isinstance(block.get("tool_use_id"), str):
        raise ValidationError(f"{where}.tool_use_id: must be a string")
    content = block.get("content") or ""
    references = []
    if isinstance(content, list):
        for index, part in enumerate(content):
            if isinstance(part, dict) and part.get("type") == "tool_reference":
                if not isinstance(part.get("tool_name"), str):
                    raise ValidationError(f"{where}.content[{index}].tool_name: must be a string")
                references.append(part["tool_name"])
        content = [p for p in content if not (isinstance(p, dict) and p.get("type") == "tool_reference")]
    return {
        "type": kind,
        "tool_use_id": block["tool_use_id"],
        "content": text_of(content, f"{where}.content", images=True),
        "is_error": block.get("is_error") is True,
        "references": references,
    }


def _tool_change(block: dict[str, Any], kind: str, where: str) -> dict[str, Any]:
    """A mid-conversation tool change (Claude Code's mid-conversation-tool-changes beta), in a system
    message: a deferred tool by reference, or a whole definition; a removal names its tool."""
    tool = block.get("tool")
    tool = tool if isinstance(tool, dict) else {}
    tool_kind = tool.get("type")
    if tool_kind == "tool_reference" and isinstance(tool.get("name"), str):
        return {"type": kind, "name": tool["name"], "definition": None}
    definition = tool.get("definition") if tool_kind == "tool_definition" else None
    if kind == "tool_addition" and isinstance(definition, dict) and isinstance(definition.get("name"), str):
        if not isinstance(definition.get("input_schema", {}), dict):
            raise ValidationError(f"{where}.tool.definition.input_schema: must be an object")
        return {"type": kind, "name": definition["name"], "definition": definition}
    raise ValidationError(
        f'{where}.tool: must be {{"type": "tool_reference", "name"}}'
        + (' or {"type": "tool_definition", "definition"}' if kind == "tool_addition" else "")
    )


def _server_call(block: dict[str, Any], where: str) -> dict[str, Any]:
    """An mcp_tool_use block handed back in a later turn."""
    if not all(isinstance(block.get(k), str) for k in ("id", "name", "server_name")):
        raise ValidationError(f"{where}: an mcp_tool_use block needs an id, a name and a server_name")
    if not isinstance(block.get("input"), dict):
        raise ValidationError(f"{where}.input: must be an object")
    return {k: block[k] for k in ("type", "id", "name", "server_name", "input")}


def block(value: Any, where: str) -> dict[str, Any]:
    """One content block, normalised (unknown fields such as cache_control left out)."""
    if not isinstance(value, dict):
        raise ValidationError(f"{where}: a content block must be an object")
    kind = value.get("type")
    if kind == "text" and isinstance(value.get("text"), str):
        return {"type": "text", "text": value["text"]}
    if kind == "tool_use":
        if not isinstance(value.get("id"), str) or not isinstance(value.get("name"), str):
            raise ValidationError(f"{where}: a tool_use block needs an id and a name")
        if not isinstance(value.get("input"), dict):
            raise ValidationError(f"{where}.input: must be an object")
        return {k: value[k] for k in ("type", "id", "name", "input")}
    if kind in ("tool_result", "mcp_tool_result"):
        return _tool_result(value, kind, where)
    if kind == "mcp_tool_use":  # a call the server made (the MCP connector)
        return _server_call(value, where)
    if kind in ("tool_addition", "tool_removal"):
        return _tool_change(value, kind, where)
    if kind == "thinking":  # the model's own thinking, handed back (sealed in its signature if omitted)
        thinking, signature = value.get("thinking"), value.get("signature")
        return {
            "type": kind,
            "thinking": thinking if isinstance(thinking, str) else "",
            "signature": signature if isinstance(signature, str) else "",
        }
    if kind == "redacted_thinking":  # encrypted by Anthropic: nothing a local model can read
        return {"type": kind}
    if kind == "image":
        return {"type": "text", "text": _image(value, where)}
    raise ValidationError(f"{where}.type: content block type {kind!r} is not supported by this server")


class ContentField(fields.Field[list[dict[str, Any]]]):
    """A message's `content`: a string or blocks, normalised to blocks."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        if not isinstance(value, list):
            raise ValidationError("must be a string or a list of content blocks")
        return [block(each, f"[{index}]") for index, each in enumerate(value)]


class SystemField(fields.Field[str]):
    """`system`: a string or a list of text blocks."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        return system_text(value)
