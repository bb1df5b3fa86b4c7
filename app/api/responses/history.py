"""The Responses API over the store: the turns a request continues, and keeping what it answered.

A stored row holds the Response as the client saw it and its input items in OpenAI's
shape (with ids). `previous_response_id` walks the chain back, `conversation` reads a
conversation's items; either way each item goes through the same normaliser as a
request's own input. A finished Response is kept (unless `store: false`) and, in a
conversation, its input and output items are appended to it.
"""

from __future__ import annotations

from typing import Any

from app.api.http import store_access
from app.api.http.errors import InvalidRequestError, NotFoundError
from app.api.prompting.items import normalized_input, with_id
from app.api.responses.request import ResponseRequest
from app.store.conversations import ConversationStore
from app.store.responses import ResponseStore


def response_store() -> ResponseStore | None:
    """This worker's response store; None with LLM_STORE=off."""
    store = store_access.current()
    return None if store is None else store.responses


def history(asked: ResponseRequest) -> list[dict[str, Any]]:
    """The items that come before this request's input: a chain of responses, or a conversation."""
    conversation = asked.conversation
    if conversation is not None:
        conversations = _conversations(conversation)
        with store_access.reachable():
            page = conversations.items(conversation)
        return normalized_input(page.items if page else [])
    previous = asked.previous_response_id
    if not previous:
        return []
    responses = response_store()
    if responses is None:
        raise InvalidRequestError(
            "This server keeps no responses (LLM_STORE=off): send the whole conversation in input.",
            param="previous_response_id",
        )
    with store_access.reachable():
        turns = responses.chain(store_access.owner(), previous)
    if turns is None:
        raise InvalidRequestError(
            f"Previous response with id '{previous}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    return normalized_input([item for turn in turns for item in (*turn.input_items, *turn.output)])


class Recorder:
    """Records a finished Response and its input items (unless `store: false`); extends its conversation."""

    def __init__(self, asked: ResponseRequest) -> None:
        self.responses = response_store() if asked.store else None
        self.conversation = asked.conversation
        store = store_access.current()
        self.conversations = store.conversations if store is not None and self.conversation else None
        self.items, self.owner = [with_id(dict(item)) for item in asked.input], store_access.owner()

    def __bool__(self) -> bool:
        return self.responses is not None or self.conversations is not None

    def save(self, response: dict[str, Any]) -> None:
        """Keep `response` as it stands (a background one is kept from the start)."""
        if self.responses is not None:
            with store_access.reachable():
                self.responses.save(self.owner, response, self.items)

    def __call__(self, response: dict[str, Any]) -> None:
        """The finished Response: kept, and in its conversation unless it failed or was cancelled."""
        self.save(response)
        ended_well = response["status"] not in ("failed", "cancelled")
        if self.conversations is not None and self.conversation and ended_well:
            with store_access.reachable():
                self.conversations.append(self.conversation, [*self.items, *response["output"]])


def found(response_id: str) -> ResponseStore:
    """The store, if it holds `response_id` for this request's owner; else a 404 as OpenAI's."""
    responses = response_store()
    if responses is None:
        raise NotFoundError(
            f"No response with id '{response_id}' is stored: this server keeps no responses "
            "(LLM_STORE=off). Send the whole conversation in input instead.",
            param="response_id",
        )
    with store_access.reachable():
        if responses.get(store_access.owner(), response_id) is None:
            raise NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
    return responses


def page(items: list[dict[str, Any]], after: str | None, limit: int, order: str) -> dict[str, Any]:
    """One page of `items` as OpenAI lists them: newest first unless `order` is asc, after an id."""
    ordered = items if order == "asc" else items[::-1]
    if after is not None:
        ids = [item.get("id") for item in ordered]
        if after not in ids:
            raise InvalidRequestError(f"No input item with id '{after}' in this response.", param="after")
        ordered = ordered[ids.index(after) + 1 :]
    data = ordered[:limit]
    return store_access.listing(data, has_more=len(ordered) > limit)


def _conversations(conversation: str) -> ConversationStore:
    """The conversation store, if it holds `conversation` for this request's owner; else a 404."""
    store = store_access.current()
    if store is None:
        raise InvalidRequestError(
            "This server keeps no conversations (LLM_STORE=off): send the whole conversation in input.",
            param="conversation",
        )
    with store_access.reachable():
        if store.conversations.get(store_access.owner(), conversation) is None:
            raise NotFoundError(f"Conversation with id '{conversation}' not found.", param="conversation")
    return store.conversations
