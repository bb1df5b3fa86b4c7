"""The Conversations family in the OpenAPI document: its routes, the Conversation object and item lists."""

from __future__ import annotations

from typing import Any

from apispec import APISpec

from app.api.conversations.schemas import (
    ConversationCreateSchema,
    ConversationUpdateSchema,
    ItemsCreateSchema,
)
from app.api.http.openapi import (
    error_responses,
    json_doc,
    list_schema,
    page_params,
    path_params,
    query_param,
)
from app.settings.models import ModelSpec

_STR = {"type": "string"}
COMPONENTS: dict[str, dict[str, Any]] = {
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


def _body(schema: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def describe(spec: APISpec, models: tuple[ModelSpec, ...]) -> None:
    """/v1/conversations and its items: each a 404 for a conversation the key did not create."""
    for name, schema in COMPONENTS.items():
        spec.components.schema(name, component=schema)
    spec.components.schema("ConversationCreateRequest", schema=ConversationCreateSchema)
    spec.components.schema("ConversationUpdateRequest", schema=ConversationUpdateSchema)
    spec.components.schema("ConversationItemsCreateRequest", schema=ItemsCreateSchema)
    conversation = json_doc("The conversation.", "Conversation")
    missing = error_responses(401, 404, 503)
    conversation_id = path_params("conversation_id")
    spec.path(
        path="/v1/conversations",
        operations={
            "post": {
                "summary": "Create a conversation, with up to 20 first items",
                "requestBody": _body("ConversationCreateRequest"),
                "responses": {200: conversation, **error_responses(400, 401, 503)},
            }
        },
    )
    spec.path(
        path="/v1/conversations/{conversation_id}",
        operations={
            "get": {"summary": "A conversation", "parameters": conversation_id,
                    "responses": {200: conversation, **missing}},
            "post": {"summary": "Replace a conversation's metadata", "parameters": conversation_id,
                     "requestBody": _body("ConversationUpdateRequest"),
                     "responses": {200: conversation, **error_responses(400, 401, 404, 503)}},
            "delete": {"summary": "Delete a conversation", "parameters": conversation_id,
                       "responses": {200: json_doc("Deleted.", "ConversationDeleted"), **missing}},
        },
    )  # fmt: skip
    items = json_doc("Items.", "ConversationItemList")
    spec.path(
        path="/v1/conversations/{conversation_id}/items",
        operations={
            "get": {
                "summary": "A conversation's items, a page at a time",
                "parameters": [
                    *conversation_id,
                    *page_params("An item", 100, 20),
                    query_param(
                        "include", {"type": "array", "items": _STR}, "Accepted; nothing more is included."
                    ),
                ],
                "responses": {200: items, **error_responses(400, 401, 404, 503)},
            },
            "post": {
                "summary": "Append up to 20 items",
                "parameters": conversation_id,
                "requestBody": _body("ConversationItemsCreateRequest"),
                "responses": {200: items, **error_responses(400, 401, 404, 503)},
            },
        },
    )
    spec.path(
        path="/v1/conversations/{conversation_id}/items/{item_id}",
        operations={
            "get": {"summary": "One item", "parameters": path_params("conversation_id", "item_id"),
                    "responses": {200: json_doc("The item.", "ConversationItem"), **missing}},
            "delete": {"summary": "Remove one item (answers the conversation)",
                       "parameters": path_params("conversation_id", "item_id"),
                       "responses": {200: conversation, **missing}},
        },
    )  # fmt: skip
