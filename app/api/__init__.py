"""The HTTP protocols over Flask, one folder per API family (families.py), over the shared rooms.

Every family folder has the same roles: `routes.py` (its blueprint), `schemas.py` (its
request bodies), `presenter.py` (its answer from the one generation loop), `objects.py`
(its answer objects), `openapi.py` (its OpenAPI components, and the operations its views declare).
"""

from __future__ import annotations

from flask import Flask
from flask_cors import CORS

from app.api import access, openapi
from app.api.batches import runner as batch_runner
from app.api.chat import routes as chat_routes
from app.api.families import FAMILIES
from app.api.generation import warm_set
from app.api.http import content_encoding, errors, skipped_tools
from app.api.routing import front, on_demand
from app.settings.current import config_of


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
    content_encoding.init_app(app)  # after the keys' check: no unauthenticated body is inflated
    skipped_tools.init_app(app)
    on_demand.init_app(app)
    app.before_request(front.route_request)  # last: after the keys, the limits and the body's decoding
    for family in FAMILIES:
        app.register_blueprint(family.routes.bp)
    sleeper = app.extensions.get("sleeper")
    if sleeper is not None:  # what a sleeping worker answers without waking its model
        sleeper.answer_makers["props"] = chat_routes.props_answer
    openapi.init_app(app)
    batch_runner.start(app)  # after the routes: a batch line goes through them
    warm_set.start(app)  # as do the warm set's requests
