"""The Responses API: `POST /v1/responses`, its token count, and the stored responses' routes."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.http import store_access
from app.api.http.body import parse_request
from app.api.http.openapi import documented
from app.api.responses import history, serving, stored
from app.api.responses import openapi as doc
from app.api.responses.request import ResponseRequest
from app.api.responses.schemas import (
    compact_request_schema,
    input_items_query_schema,
    input_tokens_request_schema,
    response_request_schema,
)
from app.api.routing.front import routed

bp = Blueprint("responses", __name__)


@bp.post("/v1/responses")
@documented(doc.CREATE)
@routed(streams=True)
def create_response() -> Response:
    """Answer the input items (after the stored turns they continue) with a Response, or its event stream."""
    asked = parse_request(response_request_schema, ResponseRequest)
    return serving.respond(asked)


@bp.post("/v1/responses/compact")
@documented(doc.COMPACT)
@routed()
def compact_response() -> Response:
    """Shorten a conversation to its user messages and a sealed summary the served model writes."""
    asked = parse_request(compact_request_schema, ResponseRequest)
    return serving.compacted(asked)


@bp.post("/v1/responses/input_tokens")
@documented(doc.INPUT_TOKENS)
@routed(streams=True)
def count_input_tokens() -> Response:
    """How many tokens the input takes after the chat template, tools included."""
    asked = parse_request(input_tokens_request_schema, ResponseRequest)
    return jsonify({"object": "response.input_tokens", "input_tokens": serving.input_tokens(asked)})


@bp.get("/v1/responses/<response_id>")
@documented(doc.RETRIEVE)
def retrieve_response(response_id: str) -> Response:
    """A stored Response as its client last saw it; a background one's events with `stream=true`."""
    return stored.retrieved(response_id)


@bp.delete("/v1/responses/<response_id>")
@documented(doc.DELETE)
def delete_response(response_id: str) -> Response:
    """Forget a stored Response and its input items."""
    responses = history.found(response_id)
    with store_access.reachable():
        responses.delete(store_access.owner(), response_id)
    return jsonify({"id": response_id, "object": "response", "deleted": True})


@bp.get("/v1/responses/<response_id>/input_items")
@documented(doc.INPUT_ITEMS)
def list_input_items(response_id: str) -> Response:
    """The input items a stored Response answered, a page at a time."""
    query = store_access.query(input_items_query_schema)
    responses = history.found(response_id)
    with store_access.reachable():
        items = responses.input_items(store_access.owner(), response_id) or []
    return jsonify(history.page(items, query.get("after"), query["limit"], query["order"]))


@bp.post("/v1/responses/<response_id>/cancel")
@documented(doc.CANCEL)
def cancel_response(response_id: str) -> Response:
    """Stop a background response; one that has finished is answered as it is."""
    return stored.cancelled(response_id)
