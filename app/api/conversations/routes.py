"""`/v1/conversations`: create, read, update and delete conversations; add, list and remove items."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from app.api.conversations import openapi as doc
from app.api.conversations.schemas import (
    conversation_create_schema,
    conversation_update_schema,
    items_create_schema,
    items_query_schema,
)
from app.api.http import store_access
from app.api.http.body import parse_json
from app.api.http.errors import NotFoundError
from app.api.http.openapi import documented
from app.api.prompting.items import new_id, with_id
from app.store.conversations import ConversationStore

bp = Blueprint("conversations", __name__)
_NO_ITEM = "Item with id '{}' not found."


def _conversations() -> ConversationStore:
    return store_access.needed("conversations", "conversation_id").conversations


def _found(conversation_id: str) -> tuple[ConversationStore, dict[str, Any]]:
    """The store and the conversation, if this request's key owns it; else a 404 as OpenAI's."""
    conversations = _conversations()
    message = f"Conversation with id '{conversation_id}' not found."
    return conversations, store_access.found(conversations.get, conversation_id, message, "conversation_id")


def _given_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items in OpenAI's shape, each keeping the id it came with (items handed back from a response)."""
    return [with_id({k: v for k, v in item.items() if k != "given_id"}, item["given_id"]) for item in items]


@bp.post("/v1/conversations")
@documented(doc.CREATE)
def create_conversation() -> Response:
    """A new conversation, with up to 20 first items."""
    body = parse_json(conversation_create_schema)
    conversations = _conversations()
    with store_access.reachable():
        conversation = conversations.create(store_access.owner(), new_id("conv"), body.get("metadata") or {})
        conversations.append(conversation["id"], _given_ids(body.get("items") or []))
    return jsonify(conversation)


@bp.get("/v1/conversations/<conversation_id>")
@documented(doc.RETRIEVE)
def get_conversation(conversation_id: str) -> Response:
    return jsonify(_found(conversation_id)[1])


@bp.post("/v1/conversations/<conversation_id>")
@documented(doc.UPDATE)
def update_conversation(conversation_id: str) -> Response:
    """Replace a conversation's metadata."""
    conversations, _ = _found(conversation_id)
    body = parse_json(conversation_update_schema)
    with store_access.reachable():
        return jsonify(conversations.set_metadata(store_access.owner(), conversation_id, body["metadata"]))


@bp.delete("/v1/conversations/<conversation_id>")
@documented(doc.DELETE)
def delete_conversation(conversation_id: str) -> Response:
    """Forget a conversation and every item in it."""
    conversations, _ = _found(conversation_id)
    with store_access.reachable():
        conversations.delete(store_access.owner(), conversation_id)
    return jsonify({"id": conversation_id, "object": "conversation.deleted", "deleted": True})


@bp.post("/v1/conversations/<conversation_id>/items")
@documented(doc.ADD_ITEMS)
def add_items(conversation_id: str) -> Response:
    """Append up to 20 items; the answer lists them as kept (with their ids)."""
    conversations, _ = _found(conversation_id)
    items = _given_ids(parse_json(items_create_schema)["items"])
    with store_access.reachable():
        conversations.append(conversation_id, items)
    return jsonify(store_access.listing(items, has_more=False))


@bp.get("/v1/conversations/<conversation_id>/items")
@documented(doc.LIST_ITEMS)
def list_items(conversation_id: str) -> Response:
    """A page of a conversation's items, newest first unless `order` is asc."""
    query = store_access.query(items_query_schema)
    conversations, _ = _found(conversation_id)
    after = query.get("after")
    return jsonify(
        store_access.page(
            lambda _: conversations.items(conversation_id, after, query["limit"], query["order"]),
            f"No item with id '{after}' in this conversation.",
        )
    )


@bp.get("/v1/conversations/<conversation_id>/items/<item_id>")
@documented(doc.ITEM)
def get_item(conversation_id: str, item_id: str) -> Response:
    conversations, _ = _found(conversation_id)
    item = store_access.found(
        lambda _, item: conversations.item(conversation_id, item),
        item_id,
        _NO_ITEM.format(item_id),
        "item_id",
    )
    return jsonify(item)


@bp.delete("/v1/conversations/<conversation_id>/items/<item_id>")
@documented(doc.DELETE_ITEM)
def delete_item(conversation_id: str, item_id: str) -> Response:
    """Remove one item; as OpenAI's, the answer is the conversation."""
    conversations, conversation = _found(conversation_id)
    with store_access.reachable():
        removed = conversations.delete_item(conversation_id, item_id)
    if not removed:
        raise NotFoundError(_NO_ITEM.format(item_id), param="item_id")
    return jsonify(conversation)
