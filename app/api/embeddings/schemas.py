"""The marshmallow schema of an embeddings request, with OpenAI's fields."""

from __future__ import annotations

from typing import Any

from marshmallow import fields, post_load, validate

from app.api.embeddings.request import EmbeddingRequest
from app.api.http.fields import StrictInteger, TextsOrTokensField
from app.api.http.schemas import BaseSchema


class EmbeddingRequestSchema(BaseSchema):
    """`POST /v1/embeddings`: texts or token lists, as floats or base64."""

    input = TextsOrTokensField(2048, required=True)
    model = fields.String(allow_none=True)
    encoding_format = fields.String(allow_none=True, validate=validate.OneOf(["float", "base64"]))
    dimensions = StrictInteger(allow_none=True, validate=validate.Range(min=1))
    user = fields.String(allow_none=True)

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> EmbeddingRequest:
        return EmbeddingRequest(
            inputs=tuple(item if isinstance(item, str) else tuple(item) for item in data["input"]),
            model=data.get("model"),
            base64=data.get("encoding_format") == "base64",
            dimensions=data.get("dimensions"),
        )


embedding_request_schema = EmbeddingRequestSchema()
