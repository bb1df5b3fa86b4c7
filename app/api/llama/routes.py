"""llama-server's own completion routes: `POST /completion` (and `/completions`), and `POST /infill`."""

from __future__ import annotations

from flask import Blueprint, Response

from app.api.http.body import parse_request
from app.api.http.openapi import documented
from app.api.llama import openapi as doc
from app.api.llama import serving
from app.api.llama.schemas import infill_schema, llama_completion_schema
from app.api.requests.completion import InfillRequest, LlamaCompletionRequest
from app.api.routing.front import routed

bp = Blueprint("llama", __name__)


@bp.post("/completion")
@bp.post("/completions")
@documented(doc.COMPLETION)
@routed(streams=True)
def create_llama_completion() -> Response:
    """llama-server's own completion: one prompt continued, with `n_probs` token probabilities."""
    asked = parse_request(llama_completion_schema, LlamaCompletionRequest)
    return serving.completion(asked)


@bp.post("/infill")
@documented(doc.INFILL)
@routed(streams=True)
def create_infill() -> Response:
    """llama-server's fill-in-the-middle for editor plugins (llama.vscode, llama.vim): the code
    around the cursor and chunks of other files, in the model's repo-level FIM layout."""
    asked = parse_request(infill_schema, InfillRequest)
    return serving.infill(asked)
