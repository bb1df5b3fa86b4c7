"""The marshmallow schema of an embeddings request, with OpenAI's fields."""

from __future__ import annotations

from marshmallow import fields, validate

from app.api.http.fields import StrictInteger, TextsOrTokensField
from app.api.http.schemas import BaseSchema


class EmbeddingRequestSchema(BaseSchema):
    """`POST /v1/embeddings`: texts or token lists, as floats or base64."""

    input = TextsOrTokensField(2048, required=True)
    model = fields.String(allow_none=True)
    encoding_format = fields.String(allow_none=True, validate=validate.OneOf(["float", "base64"]))
    dimensions = StrictInteger(allow_none=True, validate=validate.Range(min=1))
    user = fields.String(allow_none=True)


embedding_request_schema = EmbeddingRequestSchema()
