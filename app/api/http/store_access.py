"""What every API family needs of the store: this worker's store, whose data a request is, a 503 if away."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from flask import current_app, g, request
from marshmallow import Schema

from app.api.http.errors import InvalidRequestError, NotFoundError, ServiceUnavailableError
from app.store.conversations import Page
from app.store.errors import StoreUnavailableError
from app.store.opening import Store

T = TypeVar("T")


def current() -> Store | None:
    """This worker's store; None with LLM_STORE=off."""
    store: Store | None = current_app.extensions.get("store")
    return store


def needed(what: str, param: str) -> Store:
    """This worker's store, or a 404 saying it keeps no `what` (LLM_STORE=off)."""
    store = current()
    if store is None:
        raise NotFoundError(f"This server keeps no {what} (LLM_STORE=off).", param=param)
    return store


def found(lookup: Callable[[str, str], T | None], object_id: str, message: str, param: str) -> T:
    """What `lookup(owner, id)` finds for this request's key, or OpenAI's 404 with `message`
    (another key's object is as missing as one that never was)."""
    with reachable():
        value = lookup(owner(), object_id)
    if value is None:
        raise NotFoundError(message, param=param)
    return value


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


def page(listed: Callable[[str], Page | None], missing: str) -> dict[str, Any]:
    """One page of a stored list (`listed(owner)`) as OpenAI's list endpoints answer it; a 400
    saying `missing` when the page's `after` id is not in the list."""
    with reachable():
        found = listed(owner())
    if found is None:
        raise InvalidRequestError(missing, param="after")
    return listing(found.items, found.has_more)


def listing(data: list[dict[str, Any]], has_more: bool) -> dict[str, Any]:
    """A page of a list, as OpenAI's list endpoints answer it."""
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": has_more,
    }
