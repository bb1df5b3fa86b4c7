"""The Responses API over the store: whose a response is, the items it keeps, a conversation rebuilt.

A stored row holds the Response as the client saw it and its input items in OpenAI's
shape (with ids); `previous_response_id` walks the chain back and feeds each turn's
input and output through the same normaliser as a request's own input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flask import current_app, g, request
from marshmallow import Schema

from app.api.common.errors import InvalidRequestError, NotFoundError, ServiceUnavailableError
from app.api.responses.objects import new_id
from app.api.responses.schemas import normalized_input
from app.store.errors import StoreUnavailableError
from app.store.responses import ResponseStore

_TEXT_PART = {
    "user": "input_text",
    "system": "input_text",
    "developer": "input_text",
    "assistant": "output_text",
}


def store() -> ResponseStore | None:
    """This worker's response store; None with LLM_STORE=off."""
    kept = current_app.extensions.get("store")
    return None if kept is None else kept.responses


def owner() -> str:
    """Who the request's data belongs to: its API key's name, or "" (one shared space) without keys."""
    key = g.get("api_key")
    return "" if key is None else str(key.name)


@contextmanager
def reachable() -> Iterator[None]:
    """The database failing is a 503 the client may retry, never a 500 with a driver's message."""
    try:
        yield
    except StoreUnavailableError:
        raise ServiceUnavailableError(
            "The response store is unavailable right now; retry shortly.", code="store_unavailable"
        ) from None


def query(schema: Schema) -> dict[str, Any]:
    """The URL's query, validated by `schema`: repeated names (`include`) as lists, the others single."""
    args = request.args.to_dict(flat=False)
    return dict(
        schema.load({name: values if name == "include" else values[-1] for name, values in args.items()})
    )


def history(previous_response_id: str | None) -> list[dict[str, Any]]:
    """The items of every turn up to `previous_response_id`, normalised as a request's input."""
    if not previous_response_id:
        return []
    responses = store()
    if responses is None:
        raise InvalidRequestError(
            "This server keeps no responses (LLM_STORE=off): send the whole conversation in input.",
            param="previous_response_id",
        )
    with reachable():
        turns = responses.chain(owner(), previous_response_id)
    if turns is None:
        raise InvalidRequestError(
            f"Previous response with id '{previous_response_id}' not found.",
            param="previous_response_id",
            code="previous_response_not_found",
        )
    return normalized_input([item for turn in turns for item in (*turn.input_items, *turn.output)])


def keeper(body: dict[str, Any], new_input: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None] | None:
    """What keeps the finished Response with `new_input`, if this request is to be stored."""
    responses = store()
    if responses is None or body.get("store") is False:
        return None
    items, who = [with_id(item) for item in new_input], owner()

    def keep(response: dict[str, Any]) -> None:
        with reachable():
            responses.save(who, response, items)

    return keep


def found(response_id: str) -> ResponseStore:
    """The store, if it holds `response_id` for this request's owner; else a 404 as OpenAI's."""
    responses = store()
    if responses is None:
        raise NotFoundError(
            f"No response with id '{response_id}' is stored: this server keeps no responses "
            "(LLM_STORE=off). Send the whole conversation in input instead.",
            param="response_id",
        )
    with reachable():
        if responses.get(owner(), response_id) is None:
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
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(ordered) > limit,
    }


def with_id(item: dict[str, Any]) -> dict[str, Any]:
    """A normalised input item in OpenAI's shape, with an id, as input_items lists it."""
    kind = item["type"]
    if kind == "message":
        part = {"type": _TEXT_PART[item["role"]], "text": item["content"]}
        if part["type"] == "output_text":
            part["annotations"] = []
        return {
            "type": "message",
            "id": new_id("msg"),
            "role": item["role"],
            "content": [part],
            "status": "completed",
        }
    if kind == "function_call":
        return {**item, "id": new_id("fc"), "status": "completed"}
    if kind == "function_call_output":
        return {**item, "id": new_id("fco"), "status": "completed"}
    return {  # reasoning
        "type": "reasoning",
        "id": new_id("rs"),
        "summary": [],
        "content": [{"type": "reasoning_text", "text": item["text"]}],
    }
