"""vLLM's structured-output fields on the OpenAI routes: `structured_outputs` and the older `guided_*`."""

from __future__ import annotations

import json
from typing import Any

from marshmallow import ValidationError, fields, validate, validates_schema

from app.api.http.fields import StrictBoolean
from app.api.http.schemas import BaseSchema

_CHOICES = fields.List(
    fields.String(validate=validate.Length(min=1, max=1000)),
    allow_none=True,
    validate=validate.Length(min=1, max=256),
)
_PATTERN = fields.String(allow_none=True, validate=validate.Length(min=1, max=10_000))


def object_or_json_text(value: Any, what: str) -> dict[str, Any]:
    """An object as vLLM takes one: as it is, or JSON text of one (parsed here)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ValidationError(f"must be {what}: this text is not JSON") from None
    if not isinstance(value, dict):
        raise ValidationError(f"must be {what} (an object, or JSON text of one)")
    return value


class JsonSchemaField(fields.Field[dict[str, Any]]):
    """A JSON schema as vLLM takes it: an object, or JSON text of one (parsed here)."""

    OPENAPI = {"anyOf": [{"type": "object"}, {"type": "string"}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict[str, Any]:
        return object_or_json_text(value, "a JSON schema")


class StructureSchema(BaseSchema):
    """One structure of a structural tag: text `begin`, JSON following `schema`, text `end`."""

    begin = fields.String(required=True, validate=validate.Length(min=1, max=1000))
    schema = JsonSchemaField(required=True)
    end = fields.String(required=True, validate=validate.Length(max=1000))


class StructuralTagSchema(BaseSchema):
    """xgrammar's structural tag as vLLM takes it: free text in which each trigger opens a structure."""

    type = fields.String(validate=validate.Equal("structural_tag"))
    structures = fields.List(fields.Nested(StructureSchema), validate=validate.Length(min=1, max=64))
    triggers = fields.List(
        fields.String(validate=validate.Length(min=1, max=64)), validate=validate.Length(min=1, max=16)
    )
    format = fields.Raw()  # xgrammar's newer form: named so that asking for it is a clear 400

    @validates_schema
    def supported(self, data: dict[str, Any], **kwargs: Any) -> None:
        if "format" in data:
            raise ValidationError(
                "the form with `format` is not supported; send structures and triggers", "format"
            )
        for name in ("structures", "triggers"):  # (checked here, so that `format` is the error above)
            if name not in data:
                raise ValidationError("Missing data for required field.", name)
        check_begins(data)


def check_begins(tag: dict[str, Any]) -> None:
    """Each structure's begin starts with a trigger (else no trigger could open it: xgrammar's rule)."""
    for n, structure in enumerate(tag.get("structures") or ()):
        if not any(structure["begin"].startswith(trigger) for trigger in tag.get("triggers") or ()):
            raise ValidationError(f"structures[{n}].begin must start with one of the triggers", "structures")


class StructuralTagField(fields.Field[dict[str, Any]]):
    """A structural tag as vLLM's `structured_outputs.structural_tag` takes it: JSON text (or an object)."""

    OPENAPI = {"anyOf": [{"type": "string"}, {"type": "object"}]}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> dict[str, Any]:
        loaded: dict[str, Any] = StructuralTagSchema().load(object_or_json_text(value, "a structural tag"))
        return loaded


class StructuredOutputsSchema(BaseSchema):
    """vLLM's `structured_outputs`: one constraint (json, json_object, grammar, regex, choice or a
    structural tag)."""

    json = JsonSchemaField(allow_none=True)
    json_object = StrictBoolean(allow_none=True)
    grammar = fields.String(allow_none=True, validate=validate.Length(min=1))
    regex = _PATTERN
    choice = _CHOICES
    structural_tag = StructuralTagField(allow_none=True)
    # Declared so that asking for them is a clear 400, not a constraint silently dropped.
    whitespace_pattern = fields.String(allow_none=True)
    disable_any_whitespace = StrictBoolean(allow_none=True)
    disable_additional_properties = StrictBoolean(allow_none=True)
    disable_fallback = StrictBoolean(allow_none=True)  # there is no other backend to fall back to

    @validates_schema
    def supported(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("whitespace_pattern") is not None:
            raise ValidationError("is not supported by this server", "whitespace_pattern")
        for name in ("disable_any_whitespace", "disable_additional_properties"):
            if data.get(name):
                raise ValidationError("is not supported by this server (only false)", name)


class VllmConstraintsSchema(BaseSchema):
    """The constraints vLLM reads on its chat and text completion routes (one per request, as
    GenerationSchema checks with llama-server's pair)."""

    structured_outputs = fields.Nested(StructuredOutputsSchema, allow_none=True)
    guided_json = JsonSchemaField(allow_none=True)
    guided_regex = _PATTERN
    guided_choice = _CHOICES
    guided_grammar = fields.String(allow_none=True, validate=validate.Length(min=1))
    guided_decoding_backend = fields.String(allow_none=True)  # a hint: llama.cpp's grammars are the one
    guided_whitespace_pattern = fields.String(allow_none=True)

    @validates_schema
    def supported(self, data: dict[str, Any], **kwargs: Any) -> None:
        if data.get("guided_whitespace_pattern") is not None:
            raise ValidationError("is not supported by this server", "guided_whitespace_pattern")
