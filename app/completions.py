"""`POST /v1/completions`."""

from __future__ import annotations

from flask import Blueprint, Response

from app.errors import InvalidRequestError
from app.generate import engine, parse_body, plan, respond
from app.schemas import completion_schema

bp = Blueprint("completions", __name__)


@bp.post("/v1/completions")
def create_completion() -> Response:
    """Continue a text prompt (or fill in the middle, given a `suffix`)."""
    body = parse_body(completion_schema)
    tokenizer = engine().tokenizer
    if body.get("suffix"):
        if not tokenizer.supports_infill:
            raise InvalidRequestError(
                "suffix needs a model with fill-in-the-middle tokens; this one has none.",
                param="suffix",
            )
        prompt_tokens = tokenizer.infill(body["prompt"], body["suffix"])
    else:
        prompt_tokens = tokenizer.text(body["prompt"])
    gen_request = plan(body, prompt_tokens, prompt_param="prompt")
    return respond(body, gen_request, chat=False, prefix=body["prompt"] if body.get("echo") else "")
