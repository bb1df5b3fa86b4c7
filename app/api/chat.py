"""`POST /v1/chat/completions`."""

from __future__ import annotations

from flask import Blueprint, Response, current_app

from app.api import conversation, structured_output, tools
from app.api.answer import Answer
from app.api.completion_objects import Shape
from app.api.completion_presenter import CompletionPresenter
from app.api.engine_requests import plan_choices
from app.api.request_body import engine, parse_body
from app.api.respond import respond
from app.api.schemas import chat_completion_schema

bp = Blueprint("chat", __name__)


@bp.post("/v1/chat/completions")
def create_chat_completion() -> Response:
    """Answer a conversation, formatted by the model's own chat template."""
    body = parse_body(chat_completion_schema)
    the_engine = engine()
    prompt = conversation.prompt_tokens(the_engine.tokenizer, body["messages"], body)
    if tools.forced(body):
        grammar, param = tools.call_grammar(body), "tools"
    else:
        grammar, param = structured_output.response_grammar(body.get("response_format")), "response_format"
    requests = plan_choices(
        body,
        [prompt],
        prompt_param="messages",
        max_param="max_completion_tokens",
        logprobs=(body.get("top_logprobs") or 0) if body.get("logprobs") else None,
        grammar=structured_output.checked(the_engine.tokenizer, grammar, param),
        vocabulary_size=the_engine.tokenizer.vocabulary_size,
    )
    answer = Answer(
        chat=True,
        prompt_tokens=len(prompt),
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        tools=body["tools"] if tools.active(body) else None,
        tools_forced=tools.forced(body),
        choices_per_prompt=body.get("n") or 1,
    )
    shape = Shape(current_app.config["LLM"].model_id, chat=True, fingerprint=the_engine.fingerprint)
    presenter = CompletionPresenter(shape, answer, wants_logprobs=bool(body.get("logprobs")))
    return respond(the_engine, body, requests, presenter, answer.prompt_tokens)
