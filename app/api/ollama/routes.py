"""Ollama's API: `/api/chat`, `/api/generate`, `/api/embed` (and `/api/embeddings`), `/api/tags`,
`/api/show`, `/api/ps`, `/api/version`, and the root check its clients make.

The same engine, keys, limits, queue and metrics as every other route; answers and errors
in Ollama's shapes, streams as NDJSON (Ollama streams unless `stream: false`). Models come
from the server's configuration: pull, push, create, copy and delete answer 501 saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from flask import Blueprint, Flask, Response, jsonify
from flask.blueprints import BlueprintSetupState
from marshmallow import Schema

from app.api.http import roles
from app.api.http.body import check_model, load_request, model_index, parse_json
from app.api.http.errors import InvalidRequestError, PermissionDeniedError
from app.api.http.openapi import documented
from app.api.ollama import catalog, embedding, errors, serving
from app.api.ollama import openapi as doc
from app.api.ollama.presenter import now
from app.api.ollama.request import OllamaEmbedRequest, OllamaRequest
from app.api.ollama.schemas import chat_schema, embed_schema, embeddings_schema, generate_schema, show_schema
from app.api.routing import on_demand, orders, pool
from app.api.routing.front import routed
from app.settings.current import config_of, current_config
from app.settings.models import ModelSpec

bp = Blueprint("ollama", __name__)
errors.init_blueprint(bp)
# What these routes answer: JSON, or NDJSON streams (Ollama's clients send Accept: application/json).
OFFERED = ["application/json", "application/x-ndjson"]
VERSION = "0.12.6"  # the Ollama API this server speaks; clients check for a minimum version
RUNNING = "Ollama is running"
EMPTY_MESSAGE = {"message": {"role": "assistant", "content": ""}}  # chat's answer to nothing
EMPTY_RESPONSE = {"response": ""}  # generate's


def _served(use: Literal["generate", "embed"]) -> Callable[[str | None], int]:
    """How the front reads an Ollama request's model (`name:latest` is the served `name`)."""
    return lambda name: model_index(None if name is None else catalog.served_name(name, _models()), use)


def _models() -> Sequence[ModelSpec]:
    return current_config().models


def _nothing_to_answer(asked: str) -> Callable[[Mapping[str, Any]], bool]:
    """Ollama's idiom, answered by any worker: a request with nothing in `asked` (nor a suffix)."""
    return lambda body: not body.get(asked) and not body.get("suffix")


@bp.post("/api/chat")
@documented(doc.CHAT)
@routed(pick=_served("generate"), anywhere=_nothing_to_answer("messages"))
def chat() -> Response:
    """Answer the conversation: a message (with thinking and tool calls), or its NDJSON stream."""
    asked = _answerable(chat_schema, lambda asked: bool(asked.chat.messages), EMPTY_MESSAGE)
    if isinstance(asked, Response):
        return asked
    return serving.chat(asked)


@bp.post("/api/generate")
@documented(doc.GENERATE)
@routed(pick=_served("generate"), anywhere=_nothing_to_answer("prompt"))
def generate_text() -> Response:
    """Continue the prompt (through the chat template, or `raw`, or filled in before a `suffix`)."""
    asked = _answerable(generate_schema, lambda asked: bool(asked.prompt or asked.suffix), EMPTY_RESPONSE)
    if isinstance(asked, Response):
        return asked
    return serving.generated(asked)


def _answerable(
    schema: Schema, something: Callable[[OllamaRequest], bool], empty: dict[str, Any]
) -> OllamaRequest | Response:
    """The typed request, when it has `something` to answer (its keep_alive noted; it reached the
    worker holding its model before the view); or the answer to one with nothing to answer
    (Ollama's load and unload, answered by whichever worker takes it, with `empty` content)."""
    request = load_request(schema, OllamaRequest, OFFERED)
    request = request.served_as(catalog.served_name(request.named, _models()))
    if not something(request):
        return _load_or_unload(request, empty)
    check_model(request.model, "generate")
    on_demand.keep_alive(_kept_alive(request.keep_alive))
    if request.thinks and "thinking" not in catalog.capabilities(current_config().model):
        # As Ollama answers: asking a model that never thinks to think is a mistake worth a word.
        raise InvalidRequestError(f'"{request.model}" does not support thinking', param="think")
    return request


def _load_or_unload(asked: OllamaRequest, empty: dict[str, Any]) -> Response:
    """Ollama's idiom: a request with nothing to answer loads its model (or, with `keep_alive: 0`,
    unloads it) and says so."""
    index = model_index(asked.model, "generate")
    spec = current_config().models[index]
    done = {"model": asked.named, "created_at": now(), "done": True}
    if _kept_alive(asked.keep_alive) == 0:
        if spec.on_demand:
            orders.unload(index)  # those serving requests stay until idle
        reason = "unload"
    else:
        if spec.on_demand:
            pool.load(index)
        reason = "load"
    return jsonify({**done, **empty, "done_reason": reason})


@bp.post("/api/embed")
@documented(doc.EMBED)
@routed(use="embed", pick=_served("embed"))
def embed() -> Response:
    """Unit vectors of the input(s); past the context, inputs are cut unless `truncate` is false."""
    return embedding.embed(_embedding(embed_schema))


@bp.post("/api/embeddings")
@documented(doc.EMBEDDINGS)
@routed(use="embed", pick=_served("embed"))
def embeddings() -> Response:
    """The older single-prompt form: `{"embedding": [...]}`."""
    return embedding.embedding(_embedding(embeddings_schema))


def _embedding(schema: Schema) -> OllamaEmbedRequest:
    """The typed request, its model checked and its keep_alive noted (as chat's and generate's)."""
    asked = load_request(schema, OllamaEmbedRequest, OFFERED)
    check_model(catalog.served_name(asked.named, _models()), "embed")
    on_demand.keep_alive(_kept_alive(asked.keep_alive))
    return asked


def _kept_alive(seconds: float | None) -> float | None:
    """`keep_alive` as it applies: an operator's, or any without keys. How long a model stays loaded
    is what every tenant gets, so a tenant's is not applied, and its `keep_alive: 0` (unload) is a 403."""
    if not roles.tenant():
        return seconds
    if seconds == 0:
        raise PermissionDeniedError(
            "keep_alive: 0 unloads the model for every tenant: that is for operators' keys (LLM_ADMIN_KEYS).",
            param="keep_alive",
            code="operator_only",
        )
    return None


@bp.get("/api/tags")
@documented(doc.TAGS)
def tags() -> Response:
    """Every model this server serves, as Ollama lists local models."""
    served = current_config().models
    listed = [catalog.listed(spec) for spec in served]
    listed += [adapter for spec in served for adapter in catalog.listed_adapters(spec)]
    return jsonify({"models": listed})


@bp.post("/api/show")
@documented(doc.SHOW)
def show() -> Response:
    """A model's template, details, header values and capabilities (no worker need hold it)."""
    body = parse_json(show_schema)
    config = current_config()
    index = model_index(catalog.served_name(body["model"], config.models))
    return jsonify(
        catalog.shown(config.models[index], config.for_model(index).n_ctx, bool(body.get("verbose")))
    )


@bp.get("/api/ps")
@documented(doc.PS)
def running() -> Response:
    """The models loaded now, by which workers, and until when (on-demand ones with a ttl)."""
    return jsonify({"models": catalog.running(current_config(), pool.table().peers())})


@bp.get("/api/version")
@documented(doc.VERSION)
def version() -> Response:
    """The Ollama API version this server speaks."""
    return jsonify({"version": VERSION})


@bp.route("/api/pull", methods=["POST"])
@bp.route("/api/push", methods=["POST"])
@bp.route("/api/create", methods=["POST"])
@bp.route("/api/copy", methods=["POST"])
@bp.route("/api/delete", methods=["DELETE"])
@documented(doc.MANAGED)
def managed_by_configuration() -> Response:
    """Ollama's model management: not here, where models come from the server's configuration."""
    raise errors.ManagedByConfigurationError(
        "This server's models come from its configuration (LLM_MODELS): pulling, pushing, creating, "
        "copying and deleting models is not done through the API."
    )


@documented(doc.ROOT)
def root() -> Response:
    """What Ollama answers at `/`, which its clients check (the chat page answers them so when on)."""
    return Response(RUNNING, mimetype="text/plain")


@bp.record_once
def _root_without_pages(state: BlueprintSetupState) -> None:
    if not config_of(cast(Flask, state.app)).ui:  # else the chat page's view answers non-browsers this way
        state.app.add_url_rule("/", "ollama_root", root, methods=["GET", "HEAD"])
