"""`POST /v1/completions`."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app

from app.api.answer import Answer
from app.api.completion_objects import Shape
from app.api.completion_presenter import CompletionPresenter
from app.api.engine_requests import plan_choices
from app.api.errors import InvalidRequestError
from app.api.request_body import engine, parse_body
from app.api.respond import respond
from app.api.schemas import completion_schema

bp = Blueprint("completions", __name__)


@bp.post("/v1/completions")
def create_completion() -> Response:
    """Continue each text prompt (or fill in the middle, given a `suffix`)."""
    body = parse_body(completion_schema)
    the_engine = engine()
    tokenizer = the_engine.tokenizer
    if body.get("suffix") and not tokenizer.supports_infill:
        raise InvalidRequestError(
            "suffix needs a model with fill-in-the-middle tokens; this one has none.", param="suffix"
        )
    prompts, texts = zip(
        *(_prompt(tokenizer, item, body.get("suffix")) for item in body["prompt"]), strict=True
    )
    scoring = bool(body.get("echo")) and body.get("logprobs") is not None
    requests = plan_choices(
        body,
        list(prompts),
        prompt_param="prompt",
        logprobs=body.get("logprobs"),
        vocabulary_size=tokenizer.vocabulary_size,
        prompt_logprobs=scoring,
    )
    n = body.get("n") or 1
    echoed = {r.index: texts[r.index // n] for r in requests} if body.get("echo") else {}
    answer = Answer(
        chat=False,
        prompt_tokens=sum(len(tokens) for tokens in prompts),
        prefixes=echoed,
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
        choices_per_prompt=n,
    )
    shape = Shape(current_app.config["LLM"].model_id, chat=False, fingerprint=the_engine.fingerprint)
    presenter = CompletionPresenter(shape, answer, wants_logprobs=body.get("logprobs") is not None)
    return respond(the_engine, body, requests, presenter, answer.prompt_tokens)


def _prompt(tokenizer: Any, item: str | list[int], suffix: str | None) -> tuple[list[int], str]:
    """A prompt's tokens and text: from text (filled in the middle, given a suffix) or from token ids."""
    if isinstance(item, str):
        return (tokenizer.infill(item, suffix) if suffix else tokenizer.text(item)), item
    if suffix:
        raise InvalidRequestError("suffix needs text prompts, not token ids.", param="suffix")
    if not tokenizer.in_vocabulary(item):
        raise InvalidRequestError(
            f"prompt: every token id must be from 0 to {tokenizer.vocabulary_size - 1}.", param="prompt"
        )
    return item, tokenizer.detokenize(item)
