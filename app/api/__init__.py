"""The OpenAI protocol over Flask: blueprints, request schemas, response objects, streams and errors."""

from __future__ import annotations

from flask import Flask
from flask_cors import CORS

from app.api import auth, chat, completions, embeddings, errors, health, limits, models, openapi, tokenize
from app.api.anthropic import routes as anthropic
from app.api.responses import routes as responses


def init_app(app: Flask) -> None:
    """Register the API's checks, error handler and routes on `app`."""
    config = app.config["LLM"]
    auth.init_app(app)
    limits.init_app(app)  # after auth: it needs the key
    if config.cors_origins:
        CORS(
            app,
            origins=list(config.cors_origins),
            expose_headers=["X-Request-ID", "Retry-After"],
            allow_headers=["Authorization", "Content-Type", "X-Request-ID", "X-Api-Key", "Anthropic-Version"],
            max_age=600,
        )
    errors.init_app(app)
    for module in (chat, completions, responses, anthropic, embeddings, tokenize, models, health):
        app.register_blueprint(module.bp)
    openapi.init_app(app)
