"""Field types with OpenAI's JSON typing: no numeric strings, no truthy booleans, unions described."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate

from app.api.http import fetch, media
from app.api.http.media import MediaError
from app.engine.types import SAMPLER_CHARS, SAMPLER_NAMES


class StrictFloat(fields.Float):
    """A JSON number, as OpenAI takes it: no numeric strings, no booleans."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValidationError("must be a number")
        return super()._deserialize(value, attr, data, **kwargs)


class StrictInteger(fields.Integer):
    """A JSON integer: no numeric strings, no booleans, no 1.5."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int:
        if isinstance(value, bool):
            raise ValidationError("must be an integer")
        return super()._deserialize(value, attr, data, **kwargs)


class StrictBoolean(fields.Boolean):
    """A JSON true or false, nothing merely truthy."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise ValidationError("must be true or false")
        return value


class StopField(fields.Field[list[str]]):
    """`stop`: a string or a list of up to four strings, loaded as a list."""

    OPENAPI = {
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            {"type": "null"},
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[str]:
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValidationError("must be a string or a list of strings")
        if len(values) > 4:
            raise ValidationError("must hold at most 4 strings")
        return [v for v in values if v]


class SamplersField(fields.Field[list[str]]):
    """llama-server's `samplers`: a list of names, or a string of their letters ("edkypmxt"), in order."""

    OPENAPI = {
        "anyOf": [
            {"type": "array", "items": {"type": "string", "enum": sorted(SAMPLER_NAMES)}, "maxItems": 16},
            {"type": "string", "maxLength": 16},
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[str]:
        if isinstance(value, str) and len(value) <= 16:
            return [SAMPLER_CHARS[c] for c in value if c in SAMPLER_CHARS]  # others ignored, as llama-server
        if not isinstance(value, list) or len(value) > 16:
            raise ValidationError("must be a list of up to 16 sampler names, or a string of their letters")
        unknown = [name for name in value if not isinstance(name, str) or name not in SAMPLER_NAMES]
        if unknown:
            raise ValidationError(
                f"{unknown[0]!r} is not a sampler; the samplers: {', '.join(sorted(SAMPLER_NAMES))}"
            )
        return list(value)


class AdapterIdField(fields.Field[int | str]):
    """A LoRA adapter's id: its index, as llama-server numbers them, or its name from LLM_MODELS."""

    OPENAPI = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "minLength": 1}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> int | str:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | str)
            or value in ("", -1)
            or (isinstance(value, int) and value < 0)
        ):
            raise ValidationError("must be an adapter's index (0, 1, ...) or its id")
        return value


class JsonTextOrObjectField(fields.Field[str | dict[str, Any]]):
    """A function call's `arguments`: JSON text, as OpenAI sends them, or an object, as some clients do."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "object"}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | dict[str, Any]:
        if not isinstance(value, str | dict):
            raise ValidationError("must be a string (JSON text) or an object")
        return value


class ContentField(fields.Field[str]):
    """Message `content`: a string or a list of text parts, loaded as one string."""

    OPENAPI = {
        "anyOf": [
            {"type": "string"},
            {
                "type": "array",
                "items": {
                    "anyOf": [
                        {
                            "type": "object",
                            "properties": {"type": {"const": "text"}, "text": {"type": "string"}},
                            "required": ["type", "text"],
                        },
                        {
                            "type": "object",
                            "properties": {
                                "type": {"const": "image_url"},
                                "image_url": {
                                    "type": "object",
                                    "properties": {"url": {"type": "string"}, "detail": {"type": "string"}},
                                    "required": ["url"],
                                },
                            },
                            "required": ["type", "image_url"],
                        },
                        {
                            "type": "object",
                            "properties": {
                                "type": {"const": "input_audio"},
                                "input_audio": {
                                    "type": "object",
                                    "properties": {
                                        "data": {"type": "string"},
                                        "format": {"enum": list(media.AUDIO_FORMATS)},
                                    },
                                    "required": ["data", "format"],
                                },
                            },
                            "required": ["type", "input_audio"],
                        },
                    ]
                },
            },
            {"type": "null"},
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise ValidationError("must be a string or a list of content parts")
        texts = []
        for index, part in enumerate(value):
            kind = part.get("type") if isinstance(part, dict) else None
            try:
                texts.append(_part_text(kind, part))
            except MediaError as exc:
                raise ValidationError(
                    {index: {exc.field: [str(exc)]}} if exc.field else {index: [str(exc)]}
                ) from None
        return "".join(texts)


def _part_text(kind: Any, part: Any) -> str:
    """One chat completions content part as text: media as the markers that carry them."""
    if kind == "text":
        if not isinstance(part.get("text"), str):
            raise MediaError("must be a string", "text")
        return str(part["text"])
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, dict) else image
        if not isinstance(url, str):
            raise MediaError('must be {"url": a data URL}', "image_url")
        return media.embed("image", fetch.media_at(url, "image_url"), "image_url")
    if kind == "input_audio":
        audio = part.get("input_audio")
        if not isinstance(audio, dict) or not isinstance(audio.get("data"), str):
            raise MediaError('must be {"data": base64, "format": "wav", "mp3" or "flac"}', "input_audio")
        if audio.get("format") not in media.AUDIO_FORMATS:
            raise MediaError("format must be 'wav', 'mp3' or 'flac'", "input_audio")
        return media.embed("audio", media.from_base64(audio["data"], "input_audio"), "input_audio")
    raise MediaError(
        f"content part type {kind!r} is not supported; use 'text', 'image_url' or 'input_audio'", "type"
    )


class TextsOrTokensField(fields.Field[list[str | list[int]]]):
    """A string, a list of strings, a list of token ids, or a list of lists of token ids (as OpenAI
    takes `prompt` and `input`), loaded as a list whose items are strings or lists of token ids."""

    def __init__(self, limit: int, **kwargs: Any) -> None:
        tokens = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}
        described = {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": limit},
                tokens,
                {"type": "array", "items": tokens, "minItems": 1, "maxItems": limit},
            ]
        }
        super().__init__(metadata={"openapi": described}, **kwargs)
        self.limit = limit

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[str | list[int]]:
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not value:
            raise ValidationError("must be a string, a list of strings, or token ids; not empty")
        if all(_is_token(item) for item in value):
            return [value]
        if not all(isinstance(item, str) or _is_tokens(item) for item in value):
            raise ValidationError(
                "must be a string, a list of strings, a list of token ids, or a list of those"
            )
        if len(value) > self.limit:
            raise ValidationError(f"must hold at most {self.limit} items")
        return value


def _is_token(item: Any) -> bool:
    return type(item) is int and item >= 0


def _is_tokens(item: Any) -> bool:
    return isinstance(item, list) and bool(item) and all(_is_token(token) for token in item)


class ToolChoiceField(fields.Field[str | dict[str, str]]):
    """`tool_choice`: none, auto, required, or one named function."""

    OPENAPI = {
        "anyOf": [
            {"enum": ["none", "auto", "required"]},
            {
                "type": "object",
                "properties": {
                    "type": {"const": "function"},
                    "function": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
                "required": ["type", "function"],
            },
            {"type": "null"},
        ]
    }

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | dict[str, str]:
        if value in ("none", "auto", "required"):
            return str(value)
        function = value.get("function") if isinstance(value, dict) else None
        if (
            not isinstance(value, dict)
            or value.get("type") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
        ):
            raise ValidationError(
                "must be 'none', 'auto', 'required' or {'type': 'function', 'function': {'name': ...}}"
            )
        return {"name": function["name"]}


def number(low: float, high: float | None = None, *, low_inclusive: bool = True) -> fields.Float:
    """An optional JSON number within bounds (null meaning the default)."""
    return StrictFloat(
        allow_none=True, validate=validate.Range(min=low, max=high, min_inclusive=low_inclusive)
    )


def count(low: int = 0, high: int | None = None) -> fields.Integer:
    """An optional JSON integer within bounds (null meaning the default)."""
    return StrictInteger(allow_none=True, validate=validate.Range(min=low, max=high))


def _metadata_checked(value: dict[str, str]) -> None:
    """OpenAI's limits: 16 pairs, keys up to 64 characters, values up to 512."""
    if len(value) > 16 or any(len(k) > 64 or len(v) > 512 for k, v in value.items()):
        raise ValidationError("at most 16 pairs, keys up to 64 characters, values up to 512")


def metadata_field(required: bool = False) -> fields.Dict:
    """OpenAI's `metadata`: string pairs within its limits (null allowed unless required)."""
    return fields.Dict(
        keys=fields.String(), values=fields.String(), required=required, allow_none=not required,
        validate=_metadata_checked,
    )  # fmt: skip


PRIORITIES = (-1000, 1000)  # vLLM's `priority`, bounded here: lower goes first


def priority_field() -> StrictInteger:
    """vLLM's `priority` field: an integer, lower first."""
    return StrictInteger(allow_none=True, validate=validate.Range(min=PRIORITIES[0], max=PRIORITIES[1]))
