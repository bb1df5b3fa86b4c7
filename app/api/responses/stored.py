"""Stored Responses as their routes answer them: one as its client last saw it (a background one's
events again, with `stream=true`), and a background one cancelled."""

from __future__ import annotations

from typing import Any

from flask import Response, jsonify

from app.api.http import sse, store_access
from app.api.http.errors import InvalidRequestError
from app.api.responses import background, history
from app.api.responses.schemas import retrieve_query_schema
from app.settings.current import current_config
from app.store.responses import ResponseStore


def retrieved(response_id: str) -> Response:
    """A stored Response as its client last saw it; a background one's events with `stream=true`."""

    query = store_access.query(retrieve_query_schema)
    responses = history.found(response_id)
    response = _settled(responses, response_id)
    if not query["stream"]:
        return jsonify(response)
    if not (response or {}).get("background"):
        raise InvalidRequestError(
            "Only a background response can be streamed again; this one ran in the foreground.",
            param="stream",
        )
    store = store_access.current()
    assert store is not None  # found() answered 404 otherwise
    after = query.get("starting_after", -1)
    keepalive, due = current_config().sse_keepalive, background.deadline(response, current_config())
    return sse.stream_response(background.tail(store.events, responses, response_id, after, keepalive, due))


def cancelled(response_id: str) -> Response:
    """Stop a background response; one that has finished is answered as it is."""

    responses = history.found(response_id)
    with store_access.reachable():
        response = responses.get(store_access.owner(), response_id) or {}
        if not response.get("background"):
            raise InvalidRequestError(
                "Only a background response can be cancelled; this one ran in the foreground.",
                param="response_id",
            )
        responses.cancel(store_access.owner(), response_id)
    return jsonify(_settled(responses, response_id))


def _settled(responses: ResponseStore, response_id: str) -> dict[str, Any]:
    """The stored Response as a client should see it now (a run past its deadline has failed)."""
    with store_access.reachable():
        return background.settled(responses.get(store_access.owner(), response_id) or {}, current_config())
