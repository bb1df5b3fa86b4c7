"""`POST /v1/responses` and `POST /v1/responses/input_tokens`: the Responses API, stateless.

The routes of stored responses answer a 404 that says why, rather than a generic one.
"""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.api.common import conversation, structured_output
from app.api.common.body import generating_engine, parse_body
from app.api.common.errors import NotFoundError
from app.api.common.generate import generate
from app.api.common.planning import plan_choices
from app.api.responses import conversion
from app.api.responses.objects import ResponseShape
from app.api.responses.presenter import ResponsesPresenter
from app.api.responses.schemas import input_tokens_request_schema, response_request_schema
from app.settings.current import current_config

bp = Blueprint("responses", __name__)


@bp.post("/v1/responses")
def create_response() -> Response:
    """Answer the input items with a Response object, or its event stream."""
    body = parse_body(response_request_schema)
    engine = generating_engine()
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
    shape = ResponseShape(body, current_config().model_id)
    presenter = ResponsesPresenter(shape, len(prompt.tokens), prompt.reader)
    return generate(engine, body, requests, presenter, len(prompt.tokens))


@bp.post("/v1/responses/input_tokens")
def count_input_tokens() -> Response:
    """How many tokens the input takes after the chat template, tools included."""
    body = parse_body(input_tokens_request_schema)
    chat = conversion.chat_body(body)
    prompt = conversation.prompt(generating_engine().tokenizer, conversion.messages(body), chat)
    return jsonify({"object": "response.input_tokens", "input_tokens": len(prompt.tokens)})


@bp.get("/v1/responses/<response_id>")
@bp.delete("/v1/responses/<response_id>")
@bp.get("/v1/responses/<response_id>/input_items")
@bp.post("/v1/responses/<response_id>/cancel")
def stored_response(response_id: str) -> Response:
    """No response is ever stored here: say so, whatever is asked of one."""
    raise NotFoundError(
        f"No response with id '{response_id}' is stored: this server keeps no responses "
        "(store is accepted and ignored). Send the whole conversation in input instead.",
        param="response_id",
    )
