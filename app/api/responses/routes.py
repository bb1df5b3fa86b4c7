"""The Responses API: `POST /v1/responses`, its token count, and the stored responses' routes."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.common import conversation, structured_output
from app.api.common.body import generating_engine, parse_body
from app.api.common.errors import InvalidRequestError
from app.api.common.generate import generate
from app.api.common.planning import plan_choices
from app.api.responses import conversion, stored
from app.api.responses.objects import ResponseShape
from app.api.responses.presenter import ResponsesPresenter
from app.api.responses.schemas import (
    input_items_query_schema,
    input_tokens_request_schema,
    response_request_schema,
    retrieve_query_schema,
)
from app.settings.current import current_config

bp = Blueprint("responses", __name__)


@bp.post("/v1/responses")
def create_response() -> Response:
    """Answer the input items (after the stored turns they continue) with a Response, or its event stream."""
    body = parse_body(response_request_schema)
    engine = generating_engine()
    new_input = body["input"]
    body = {**body, "input": stored.history(body.get("previous_response_id")) + new_input}
    chat = conversion.chat_body(body)
    prompt = conversation.prompt(engine.tokenizer, conversion.messages(body), chat)
    grammar, triggers, param = conversion.grammar(
        chat, (body.get("text") or {}).get("format"), prompt.profile
    )
    requests = plan_choices(
        chat,
        [prompt.tokens],
        prompt_param="input",
        max_param="max_output_tokens",
        grammar=structured_output.checked(engine.tokenizer, grammar, param),
        grammar_triggers=triggers,
        vocabulary_size=engine.tokenizer.vocabulary_size,
    )
    keep = stored.keeper(body, new_input)
    shape = ResponseShape(body, current_config().model_id, stored=keep is not None)
    presenter = ResponsesPresenter(shape, len(prompt.tokens), prompt.reader, on_final=keep)
    return generate(engine, body, requests, presenter, len(prompt.tokens))


@bp.post("/v1/responses/input_tokens")
def count_input_tokens() -> Response:
    """How many tokens the input takes after the chat template, tools included."""
    body = parse_body(input_tokens_request_schema)
    chat = conversion.chat_body(body)
    prompt = conversation.prompt(generating_engine().tokenizer, conversion.messages(body), chat)
    return jsonify({"object": "response.input_tokens", "input_tokens": len(prompt.tokens)})


@bp.get("/v1/responses/<response_id>")
def retrieve_response(response_id: str) -> Response:
    """A stored Response, as its client last saw it."""
    query = stored.query(retrieve_query_schema)
    responses = stored.found(response_id)
    if query["stream"]:
        raise InvalidRequestError(
            "Only a background response can be streamed again; this one ran in the foreground "
            "(and background is not supported by this server yet).",
            param="stream",
        )
    with stored.reachable():
        return jsonify(responses.get(stored.owner(), response_id))


@bp.delete("/v1/responses/<response_id>")
def delete_response(response_id: str) -> Response:
    """Forget a stored Response and its input items."""
    responses = stored.found(response_id)
    with stored.reachable():
        responses.delete(stored.owner(), response_id)
    return jsonify({"id": response_id, "object": "response", "deleted": True})


@bp.get("/v1/responses/<response_id>/input_items")
def list_input_items(response_id: str) -> Response:
    """The input items a stored Response answered, a page at a time."""
    query = stored.query(input_items_query_schema)
    responses = stored.found(response_id)
    with stored.reachable():
        items = responses.input_items(stored.owner(), response_id) or []
    return jsonify(stored.page(items, query.get("after"), query["limit"], query["order"]))


@bp.post("/v1/responses/<response_id>/cancel")
def cancel_response(response_id: str) -> Response:
    """Only a background response can be cancelled, and none runs in the background here yet."""
    stored.found(response_id)
    raise InvalidRequestError(
        "Only a background response can be cancelled; this one has already finished.", param="response_id"
    )
