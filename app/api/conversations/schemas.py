"""Marshmallow schemas of the Conversations API: a conversation's metadata, items to add, list queries."""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, fields, validate

from app.api.http.fields import metadata_field
from app.api.http.schemas import BaseSchema
from app.api.prompting.items import normalized_input

MAX_ITEMS = 20  # per request, as OpenAI's API takes them


class ItemsField(fields.Field[list[dict[str, Any]]]):
    """A list of items (messages, function calls and outputs, reasoning), checked; ids kept when given."""

    OPENAPI = {"type": "array", "maxItems": MAX_ITEMS, "items": {"type": "object"}}

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise ValidationError("must be a list of items")
        if len(value) > MAX_ITEMS:
            raise ValidationError(f"at most {MAX_ITEMS} items per request")
        normalized = normalized_input(value)
        given = [item.get("id") if isinstance(item.get("id"), str) else None for item in value]
        return [{**item, "given_id": item_id} for item, item_id in zip(normalized, given, strict=True)]


class ConversationCreateSchema(BaseSchema):
    """`POST /v1/conversations`."""

    items = ItemsField(allow_none=True)
    metadata = metadata_field()


class ConversationUpdateSchema(BaseSchema):
    """`POST /v1/conversations/{id}`: new metadata."""

    metadata = metadata_field(required=True)


class ItemsCreateSchema(BaseSchema):
    """`POST /v1/conversations/{id}/items`."""

    items = ItemsField(required=True)


class ItemsQuerySchema(BaseSchema):
    """`GET /v1/conversations/{id}/items`: a page, as OpenAI pages lists."""

    after = fields.String(validate=validate.Length(min=1, max=120))
    limit = fields.Integer(load_default=20, validate=validate.Range(1, 100))
    order = fields.String(load_default="desc", validate=validate.OneOf(["asc", "desc"]))
    include = fields.List(fields.String())


conversation_create_schema = ConversationCreateSchema()
conversation_update_schema = ConversationUpdateSchema()
items_create_schema = ItemsCreateSchema()
items_query_schema = ItemsQuerySchema()
