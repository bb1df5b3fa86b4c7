"""The Conversations family in the OpenAPI document: its routes, the Conversation object and item lists."""

from __future__ import annotations

from typing import Any

from app.api.conversations.schemas import (
    ConversationCreateSchema,
    ConversationUpdateSchema,
    ItemsCreateSchema,
)
from app.api.http.openapi import Component, json_doc, list_schema, operation, page_params, query_param

_STR = {"type": "string"}
OBJECTS: dict[str, dict[str, Any]] = {
    "Conversation": {
        "type": "object",
        "required": ["id", "object", "created_at", "metadata"],
        "properties": {
            "id": _STR,
            "object": {"const": "conversation"},
            "created_at": {"type": "integer"},
            "metadata": {"type": "object", "additionalProperties": _STR},
        },
    },
    "ConversationDeleted": {
        "type": "object",
        "required": ["id", "object", "deleted"],
        "properties": {"id": _STR, "object": {"const": "conversation.deleted"}, "deleted": {"const": True}},
    },
    "ConversationItem": {"type": "object", "required": ["type", "id"], "properties": {"id": _STR}},
    "ConversationItemList": list_schema("ConversationItem"),
}


COMPONENTS: dict[str, Component] = {
    **OBJECTS,
    "ConversationCreateRequest": ConversationCreateSchema,
    "ConversationUpdateRequest": ConversationUpdateSchema,
    "ConversationItemsCreateRequest": ItemsCreateSchema,
}


# /v1/conversations and its items: each a 404 for a conversation the key did not create.
_CONVERSATION, _ITEMS = (
    json_doc("The conversation.", "Conversation"),
    json_doc("Items.", "ConversationItemList"),
)
_MISSING = (401, 404, 503)
CREATE = operation(
    "Create a conversation, with up to 20 first items",
    _CONVERSATION,
    (400, 401, 503),
    body="ConversationCreateRequest",
)
RETRIEVE = operation("A conversation", _CONVERSATION, _MISSING)
UPDATE = operation(
    "Replace a conversation's metadata",
    _CONVERSATION,
    (400, 401, 404, 503),
    body="ConversationUpdateRequest",
)
DELETE = operation("Delete a conversation", json_doc("Deleted.", "ConversationDeleted"), _MISSING)
LIST_ITEMS = operation(
    "A conversation's items, a page at a time",
    _ITEMS,
    (400, 401, 404, 503),
    parameters=[
        *page_params("An item", 100, 20),
        query_param("include", {"type": "array", "items": _STR}, "Accepted; nothing more is included."),
    ],
)
ADD_ITEMS = operation(
    "Append up to 20 items", _ITEMS, (400, 401, 404, 503), body="ConversationItemsCreateRequest"
)
ITEM = operation("One item", json_doc("The item.", "ConversationItem"), _MISSING)
DELETE_ITEM = operation("Remove one item (answers the conversation)", _CONVERSATION, _MISSING)
