"""Marshmallow schemas of the token routes' bodies: llama.cpp server's names, and vLLM's beside them."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validates_schema

from app.api.http.fields import StrictBoolean
from app.api.http.schemas import BaseSchema
from app.api.tokens.request import DetokenizeRequest, TokenizeRequest


class TokenizeSchema(BaseSchema):
    """`POST /tokenize`: text to token ids."""

    model = fields.String(allow_none=True)
    content = fields.String()
    prompt = fields.String()  # vLLM's name for it
    add_special = StrictBoolean(allow_none=True)
    add_special_tokens = StrictBoolean(allow_none=True)  # vLLM's name for it
    parse_special = StrictBoolean(allow_none=True)
    with_pieces = StrictBoolean(allow_none=True)
    return_token_strs = StrictBoolean(allow_none=True)  # vLLM's: the vocabulary's own strings

    @validates_schema
    def text_given(self, data: dict[str, Any], **kwargs: Any) -> None:
        """One of the two names of the text is needed."""
        if "content" not in data and "prompt" not in data:
            raise ValidationError("is required", "content")

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> TokenizeRequest:
        return TokenizeRequest(
            text=data.get("content", data.get("prompt", "")),
            model=data.get("model"),
            add_special=bool(data.get("add_special", data.get("add_special_tokens"))),
            parse_special=data.get("parse_special") is not False,
            with_pieces=bool(data.get("with_pieces")),
            token_strs=bool(data.get("return_token_strs")),
        )


class DetokenizeSchema(BaseSchema):
    """`POST /detokenize`: token ids to text."""

    model = fields.String(allow_none=True)
    tokens = fields.List(fields.Integer(strict=True), required=True)

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> DetokenizeRequest:
        return DetokenizeRequest(tokens=tuple(data["tokens"]), model=data.get("model"))


tokenize_schema, detokenize_schema = TokenizeSchema(), DetokenizeSchema()
