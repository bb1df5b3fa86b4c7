"""Marshmallow schemas of Ollama's request bodies: chat, generate, embed, show, with `options`."""

from __future__ import annotations

import re
from typing import Any

from marshmallow import ValidationError, fields, post_load, pre_load, validate, validates_schema

from app.api.http import media
from app.api.http.fields import StrictBoolean, StrictInteger, count, number
from app.api.http.media import MediaError
from app.api.http.schemas import BaseSchema
from app.api.ollama import conversion
from app.api.ollama.request import OllamaEmbedRequest, OllamaRequest


class FormatField(fields.Field[str | dict[str, Any]]):
    """`format`: "json" (any JSON), a JSON schema (an object), or "" (free text)."""

    OPENAPI = {"anyOf": [{"enum": ["", "json"]}, {"type": "object"}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str | dict[str, Any]:
        if isinstance(value, dict):
            return value
        if value in ("", "json"):
            return str(value)
        raise ValidationError('must be "json" or a JSON schema (an object)')


class ThinkField(fields.Field[bool | str]):
    """`think`: true or false, or a level ("low", "medium", "high") for models that take one."""

    OPENAPI = {"anyOf": [{"type": "boolean"}, {"enum": ["low", "medium", "high"]}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool | str:
        if isinstance(value, bool):
            return value
        if value in ("low", "medium", "high"):
            return str(value)
        raise ValidationError('must be true, false, "low", "medium" or "high"')


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_GO_DURATION = re.compile(r"(-?)((?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+)")


class KeepAliveField(fields.Field[float]):
    """`keep_alive`, loaded as seconds: a Go duration ("5m", "1h30m", "300ms"), a number of seconds, 0
    (unload once idle), or negative (keep for good)."""

    OPENAPI = {"anyOf": [{"type": "number"}, {"type": "string"}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            if re.fullmatch(r"-?\d+(\.\d+)?", value.strip()):
                return float(value)
            if match := _GO_DURATION.fullmatch(value.strip()):
                parts = re.findall(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)", match[2])
                seconds = sum(float(number) * _UNITS[unit] for number, unit in parts)
                return -seconds if match[1] else seconds
        raise ValidationError('must be a duration such as "5m", or a number of seconds')


class OllamaOptionsSchema(BaseSchema):
    """The model options Ollama takes per request; load-time ones it names (num_gpu, num_thread,
    use_mmap...) are this server's settings and are ignored here."""

    num_predict = StrictInteger(allow_none=True, validate=validate.Range(min=-2))
    num_ctx = count(1)
    temperature = number(0, 2)
    top_k = count(0)
    top_p = number(0, 1)
    min_p = number(0, 1)
    typical_p = number(0, 1)
    seed = StrictInteger(allow_none=True)
    stop = fields.List(fields.String(), allow_none=True, validate=validate.Length(max=16))
    repeat_penalty = number(0)
    repeat_last_n = StrictInteger(allow_none=True, validate=validate.Range(min=-1, max=1 << 20))
    presence_penalty = number(-2, 2)
    frequency_penalty = number(-2, 2)
    mirostat = StrictInteger(allow_none=True, validate=validate.OneOf([0, 1, 2]))
    mirostat_tau = number(0)
    mirostat_eta = number(0, 1)

    @validates_schema
    def predicts_something(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("num_predict") == 0:
            raise ValidationError("must be -1 (no limit), -2 (fill the context) or at least 1", "num_predict")


class OllamaCalledFunctionSchema(BaseSchema):
    name = fields.String(required=True)
    arguments = fields.Dict(load_default=dict)


class OllamaToolCallSchema(BaseSchema):
    function = fields.Nested(OllamaCalledFunctionSchema, required=True)


class ImagesField(fields.Field[str]):
    """`images`: base64 strings, loaded as the markers that carry them (app/api/http/media.py), to go
    before the text as Ollama puts a message's images."""

    OPENAPI = {"type": "array", "items": {"type": "string", "contentEncoding": "base64"}}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> str:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValidationError("must be a list of base64 strings")
        markers = []
        for index, item in enumerate(value):
            try:
                markers.append(media.embed("image", media.from_base64(item, str(index)), str(index)))
            except MediaError as exc:
                raise ValidationError({index: [str(exc)]}) from None
        return "".join(markers)


def _images_before(data: dict[str, Any], text: str) -> dict[str, Any]:
    """`images` (their markers) moved to the front of the `text` field, where Ollama puts them."""
    images = data.pop("images", None)
    if images:
        data[text] = images + data[text]
    return data


class OllamaMessageSchema(BaseSchema):
    """One Ollama chat message; its images go before its text."""

    role = fields.String(required=True, validate=validate.OneOf(["system", "user", "assistant", "tool"]))
    content = fields.String(load_default="")
    thinking = fields.String(allow_none=True)
    images = ImagesField(allow_none=True)
    tool_calls = fields.List(fields.Nested(OllamaToolCallSchema), allow_none=True)
    tool_name = fields.String(allow_none=True)

    @post_load
    def images_in_content(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return _images_before(data, "content")


class OllamaFunctionSchema(BaseSchema):
    name = fields.String(required=True, validate=validate.Regexp(r"^[A-Za-z0-9_-]{1,64}$"))
    description = fields.String(allow_none=True)
    parameters = fields.Dict(allow_none=True)


class OllamaToolSchema(BaseSchema):
    type = fields.String(load_default="function", validate=validate.Equal("function"))
    function = fields.Nested(OllamaFunctionSchema, required=True)


class ModelNamed(BaseSchema):
    """A request naming a model, as Ollama's clients write it: `name:tag` (the view resolves `:latest`,
    catalog.served_name; answers echo the name as written, as Ollama's do)."""

    model = fields.String(required=True, validate=validate.Length(min=1, max=256))

    @post_load
    def loaded(self, data: dict[str, Any], **kwargs: Any) -> Any:
        return self.typed(data)

    def typed(self, data: dict[str, Any]) -> Any:
        """What the loaded fields become (a subclass's typed request; here, the fields)."""
        return data


class GenerationBase(ModelNamed):
    format = FormatField(allow_none=True)
    options = fields.Nested(OllamaOptionsSchema, allow_none=True)
    stream = StrictBoolean(load_default=True)  # Ollama streams unless told not to
    keep_alive = KeepAliveField(allow_none=True)
    think = ThinkField(allow_none=True)
    # Ollama's (0.12.11 on): each generated token's log-probability, and the likeliest at its place.
    logprobs = StrictBoolean(allow_none=True)
    top_logprobs = count(0, 20)


class ChatSchema(GenerationBase):
    messages = fields.List(fields.Nested(OllamaMessageSchema), load_default=list)
    tools = fields.List(fields.Nested(OllamaToolSchema), allow_none=True, validate=validate.Length(max=128))

    def typed(self, data: dict[str, Any]) -> OllamaRequest:
        return conversion.chat_request(data)


class GenerateSchema(GenerationBase):
    prompt = fields.String(load_default="")
    suffix = fields.String(allow_none=True)
    system = fields.String(allow_none=True)
    template = fields.String(allow_none=True)
    raw = StrictBoolean(allow_none=True)
    context = fields.List(fields.Integer(), allow_none=True)
    images = ImagesField(allow_none=True)

    @validates_schema
    def what_is_refused(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("template"):
            raise ValidationError(
                "is not supported: the model's own chat template (or raw) applies", "template"
            )
        if data.get("context"):
            raise ValidationError("is not supported: send the conversation to /api/chat instead", "context")
        if data.get("images") and data.get("suffix"):
            raise ValidationError("cannot go with a suffix (fill-in-the-middle reads text)", "images")

    def typed(self, data: dict[str, Any]) -> OllamaRequest:
        return conversion.generate_request(_images_before(data, "prompt"))


class EmbedSchema(ModelNamed):
    input = fields.Raw(required=True)
    truncate = StrictBoolean(load_default=True)
    dimensions = count(1)
    options = fields.Nested(OllamaOptionsSchema, allow_none=True)
    keep_alive = KeepAliveField(allow_none=True)

    @validates_schema
    def texts(self, data: dict[str, Any], **kwargs: Any) -> None:
        given = data.get("input")
        if not (
            isinstance(given, str)
            or isinstance(given, list)
            and given
            and all(isinstance(t, str) for t in given)
        ):
            raise ValidationError("must be a string or a non-empty list of strings", "input")

    def typed(self, data: dict[str, Any]) -> OllamaEmbedRequest:
        given = data["input"]
        return OllamaEmbedRequest(
            named=data["model"],
            texts=(given,) if isinstance(given, str) else tuple(given),
            truncate=data["truncate"],
            dimensions=data.get("dimensions"),
            keep_alive=data.get("keep_alive"),
        )


class EmbeddingsSchema(ModelNamed):
    prompt = fields.String(required=True)
    options = fields.Nested(OllamaOptionsSchema, allow_none=True)
    keep_alive = KeepAliveField(allow_none=True)

    def typed(self, data: dict[str, Any]) -> OllamaEmbedRequest:
        prompt, keep_alive = data["prompt"], data.get("keep_alive")
        return OllamaEmbedRequest(named=data["model"], texts=(prompt,), keep_alive=keep_alive)


class ShowSchema(ModelNamed):
    verbose = StrictBoolean(allow_none=True)
    name = fields.String(load_only=True, validate=validate.Length(min=1, max=256))

    @pre_load
    def named(self, data: Any, **kwargs: Any) -> Any:
        """Ollama's older `name` for `model`, which Continue still sends to /api/show."""
        if isinstance(data, dict) and "model" not in data and "name" in data:
            return {**data, "model": data["name"]}
        return data


chat_schema = ChatSchema()
generate_schema = GenerateSchema()
embed_schema = EmbedSchema()
embeddings_schema = EmbeddingsSchema()
show_schema = ShowSchema()
