"""The marshmallow schema of a rerank request: llama-server's, Jina's and Cohere's fields."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, post_load, validate

from app.api.http.fields import StrictBoolean, StrictInteger
from app.api.http.schemas import BaseSchema
from app.api.rerank.request import RerankRequest

MAX_DOCUMENTS = 1000


class DocumentsField(fields.Field[list[str]]):
    """Documents as strings, or as objects with a `text` (Cohere's and Jina's other form)."""

    OPENAPI = {
        "type": "array",
        "minItems": 1,
        "maxItems": MAX_DOCUMENTS,
        "items": {"anyOf": [{"type": "string"}, {"type": "object", "required": ["text"],
                                                 "properties": {"text": {"type": "string"}}}]},
    }  # fmt: skip

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[str]:
        if not isinstance(value, list) or not value:
            raise ValidationError("must be a non-empty list of documents")
        if len(value) > MAX_DOCUMENTS:
            raise ValidationError(f"at most {MAX_DOCUMENTS} documents per request")
        texts = []
        for index, document in enumerate(value):
            text = document.get("text") if isinstance(document, dict) else document
            if not isinstance(text, str) or not text:
                raise ValidationError(
                    f"documents[{index}] must be a non-empty string or an object with a text"
                )
            texts.append(text)
        return texts


class RerankRequestSchema(BaseSchema):
    """`POST /v1/rerank`: score each document's relevance to the query."""

    model = fields.String(allow_none=True)
    query = fields.String(required=True, validate=validate.Length(min=1))
    documents = DocumentsField(required=True)
    top_n = StrictInteger(allow_none=True, validate=validate.Range(min=1))
    return_documents = StrictBoolean(allow_none=True)

    @post_load
    def typed(self, data: dict[str, Any], **kwargs: Any) -> RerankRequest:
        return RerankRequest(
            query=data["query"],
            documents=tuple(data["documents"]),
            model=data.get("model"),
            top_n=data.get("top_n"),
            return_documents=bool(data.get("return_documents")),
        )


rerank_request_schema = RerankRequestSchema()
