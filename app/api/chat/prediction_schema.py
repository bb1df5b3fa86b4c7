"""OpenAI's `prediction` field: the answer as the client expects most of it to be (an edit's file)."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate, validates

from app.api.http.schemas import BaseSchema


class PredictionSchema(BaseSchema):
    """`{"type": "content", "content": text or [{"type": "text", "text": ...}]}`."""

    type = fields.String(required=True, validate=validate.OneOf(["content"]))
    content = fields.Raw(required=True)

    @validates("content")
    def text_or_text_parts(self, value: Any, **kwargs: Any) -> None:
        if isinstance(value, str) or (isinstance(value, list) and all(_text_part(part) for part in value)):
            return
        raise ValidationError("must be a string or a list of {type: text, text} parts")


def _text_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
