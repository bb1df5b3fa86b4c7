"""The HTTP protocols over Flask, one folder per API family, all over `common/`.

Every family folder has the same roles: `routes.py` (its blueprint), `schemas.py` (its
request bodies), `presenter.py` (its answer from the one generation loop), `objects.py`
(its answer objects), `openapi.py` (its part of the OpenAPI document).
"""

from __future__ import annotations

from flask import Flask
from flask_cors import CORS

from app.api import access, openapi
from app.api.anthropic import routes as anthropic
from app.api.batches import routes as batches
from app.api.batches import runner as batch_runner
from app.api.chat import routes as chat
from app.api.common import errors, on_demand
from app.api.conversations import routes as conversations
from app.api.embeddings import routes as embeddings
from app.api.files import routes as files
from app.api.meta import routes as meta
from app.api.models import routes as models
from app.api.ollama import routes as ollama
from app.api.rerank import routes as rerank
from app.api.responses import routes as responses
from app.api.tokens import routes as tokens
from app.settings.current import config_of

FAMILIES = (
    chat, responses, conversations, files, batches, anthropic, embeddings, rerank, tokens, meta, models,
    ollama,
)  # fmt: skip


def init_app(app: Flask) -> None:
    """Register the API's checks, error handler, every family's routes and the OpenAPI document."""
    access.init_app(app)
    config = config_of(app)
    if config.cors_origins:
        CORS(
            app,
            origins=list(config.cors_origins),
            expose_headers=["X-Request-ID", "Retry-After"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID", "X-Api-Key", "Anthropic-Version"],
            max_age=600,
        )
    errors.init_app(app)
    on_demand.init_app(app)
    for family in FAMILIES:
        app.register_blueprint(family.bp)
    openapi.init_app(app)
    batch_runner.start(app)  # after the routes: a batch line goes through them
